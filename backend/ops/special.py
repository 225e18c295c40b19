"""Special functions (polygamma, zeta, Bessel, orthogonal polynomials) lowered to JAX."""

from __future__ import annotations
