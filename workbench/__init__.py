"""workbench package."""
