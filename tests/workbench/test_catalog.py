import json

import pytest

from tpu_workbench.bench.catalog import CatalogError, UnknownChipError, load_catalog

REQUIRED = [
    "A100",
    "H100 SXM",
    "H200",
    "B200",
    "GB200",
    "MI300X",
    "MI355X",
    "TPU v4",
    "TPU v5e",
    "TPU v5p",
    "TPU v6e",
    "TPU v7",
    "Trainium2",
    "Trainium2 UltraServer",
]
GIB = 1.073741824


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_all_required_chips_with_bf16_peak_and_sources(catalog):
    assert set(REQUIRED) <= set(catalog.names())
    for name in REQUIRED:
        chip = catalog.chip(name)
        assert chip.peak_tflops["bf16"] > 0 and chip.sources, name
        assert chip.hbm_gb > 0 and chip.hbm_bw_gbps > 0 and chip.scaleup_domain >= 1


def test_prices_carry_tier_source_and_date(catalog):
    n = 0
    for chip in catalog.chips():
        for p in chip.prices:
            assert p.source and p.date and p.usd_per_chip_hour > 0
            n += 1
    assert n >= 25
    assert catalog.chip("TPU v7").price("own-hyperscaler").usd_per_chip_hour == 1.21


def test_tpu_v7_per_device_peak_is_half_the_chip(catalog):
    v7 = catalog.chip("ironwood")
    assert v7.name == "TPU v7" and v7.devices_per_chip == 2
    assert v7.peak("bf16", per="device") == pytest.approx(2307e12 / 2)
    assert v7.peak_tflops_per_device["fp8"] == pytest.approx(2307)
    assert catalog.chip("H100").peak("bf16", per="device") == catalog.chip("H100").peak("bf16")


def test_gib_converted_and_bidirectional_links_halved(catalog):
    assert catalog.chip("TPU v4").hbm_gb == pytest.approx(32 * GIB)
    assert catalog.chip("v6e").scaleup_bw_uni_gbps == 400
    assert catalog.chip("H100").scaleup_bw_uni_gbps == 450


def test_unknown_chip_lists_known_chips(catalog):
    with pytest.raises(UnknownChipError) as err:
        catalog.chip("MI350X")
    assert "MI350X" in str(err.value) and "TPU v7" in str(err.value) and "H100 SXM" in str(err.value)


def test_missing_precision_is_an_error_not_a_fallback(catalog):
    with pytest.raises(ValueError, match="bf16"):
        catalog.chip("A100").peak("fp8")


def test_device_name_matching(catalog):
    assert catalog.match_device_name("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert catalog.match_device_name("NVIDIA H200").name == "H200"
    assert catalog.match_device_name("Some Unknown GPU") is None
    assert catalog.match_device_name("NVIDIA H100 PCIe") is None  # not the SXM part: no silent peak
    assert catalog.match_device_name("NVIDIA H100 NVL") is None


def test_user_file_adds_chip_and_price(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text("""
[[chip]]
name = "MyChip"
peak_tflops = { bf16 = 100.0 }
hbm_gb = 10
hbm_bw_gbps = 500
scaleup_bw_gbps = 100
scaleup_domain = 4

[[price]]
chip = "H100"
tier = "spot"
usd_per_chip_hour = 0.9
source = "my quote"
date = "2026-11-01"
""")
    cat = load_catalog([f])
    assert cat.chip("mychip").peak("bf16") == 100e12
    assert cat.chip("H100 SXM").price("spot").source == "my quote"


def test_malformed_files_are_rejected(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "chip": [
                    {
                        "name": "X",
                        "peak_tflops": {"bf16": -1},
                        "hbm_gb": 1,
                        "hbm_bw_gbps": 1,
                        "scaleup_bw_gbps": 1,
                        "scaleup_domain": 1,
                    }
                ]
            }
        )
    )
    with pytest.raises(CatalogError, match="positive"):
        load_catalog([bad])
    bad.write_text(json.dumps({"chip": [{"name": "X", "peak_tflops": {"bf16": 1}}]}))
    with pytest.raises(CatalogError, match="hbm"):
        load_catalog([bad])


def test_corrections_each_with_a_source(catalog):
    gb200 = catalog.chip("GB200")
    assert gb200.hbm_gb == 186 and any("13.4 TB" in src for src in gb200.sources)
    assert [d["value"] for d in gb200.disputed if d["field"] == "hbm_gb"] == [192]
    b200 = catalog.chip("B200")
    assert b200.hbm_bw_gbps == 8000 and "8.0 TB/s is used because" in b200.notes
    assert [d["value"] for d in b200.disputed] == [7700]
    v5p = catalog.chip("v5p")
    assert (v5p.scaleup_domain, v5p.pod_chips) == (6144, 8960) and "6,144" in v5p.notes
    trn2, ultra = catalog.chip("trn2"), catalog.chip("trn2 ultraserver")
    assert (trn2.scaleup_domain, ultra.scaleup_domain) == (16, 64)
    v7 = catalog.chip("TPU v7")
    assert v7.hbm_bw_gbps == 7370 and sorted(d["value"] for d in v7.disputed) == [7200, 7300, 7400]
    assert v7.hbm_gbytes_per_device == pytest.approx(96 * GIB) and v7.d2d_gbytes_per_s == 1080
    for chip in catalog.chips():
        for d in chip.disputed:
            assert d["source"] and d["unit"], (chip.name, d)


def test_every_tpu_stores_hbm_in_gib(catalog):
    for name, gib in (("TPU v4", 32), ("TPU v5e", 16), ("TPU v5p", 95), ("TPU v6e", 32), ("TPU v7", 192)):
        assert catalog.chip(name).hbm_gb == pytest.approx(gib * GIB), name


def test_scaleout_is_stored_in_vendor_gbits_and_converted(catalog):
    v5e, v6e, h100 = catalog.chip("v5e"), catalog.chip("v6e"), catalog.chip("H100")
    assert (v5e.scaleout_gbits_per_s_per_chip, v5e.scaleout_gbytes_per_s_per_chip) == (25, 25 / 8)
    assert v6e.scaleout_gbytes_per_s_per_chip == 12.5 and "25.6 Tbps" in v6e.scaleout_note
    assert h100.scaleout_gbytes_per_s_per_chip == 50
    assert catalog.chip("A100").scaleout_gbytes_per_s_per_chip is None  # no figure: never a silent default


def test_old_or_year_only_prices_are_stale():
    import datetime as dt

    cat = load_catalog()
    today = dt.date(2026, 12, 1)
    a100 = next(p for p in cat.chip("A100").prices if p.tier == "on-demand")
    assert "older than a year" in a100.staleness(today)
    h100 = next(p for p in cat.chip("H100").prices if p.tier == "on-demand")
    assert "June 2025" in h100.staleness(today)
    for name in ("TPU v4", "TPU v5e", "TPU v5p"):
        assert "dated only by year" in cat.chip(name).prices[0].staleness(today)
    assert cat.chip("TPU v7").price("own-hyperscaler").staleness(today) == ""
    assert cat.chip("B200").price("own-hyperscaler").staleness(dt.date(2027, 6, 1)) != ""


def test_catalog_list_shows_the_stale_flag(capsys):
    from tpu_workbench.bench.cli import main

    assert main(["catalog", "list"]) == 0
    out = capsys.readouterr().out
    assert "STALE: dated only by year (2025)" in out and "owner-tco" in out and "provider-internal" in out
    assert "Trainium2 UltraServer" in out


def test_torus_chip_without_axis_bandwidth_is_rejected(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "chip": [
                    {
                        "name": "X",
                        "peak_tflops": {"bf16": 1},
                        "hbm_gb": 1,
                        "hbm_bw_gbps": 1,
                        "scaleup_bw_gbps": 1,
                        "scaleup_domain": 4,
                        "scaleup_topology": "torus-2d",
                    }
                ]
            }
        )
    )
    with pytest.raises(CatalogError, match="ici_axis"):
        load_catalog([bad])


def test_user_catalog_errors_name_the_file_and_the_entry_line(tmp_path) -> None:
    import pytest

    from tpu_workbench.bench.catalog import CatalogError, load_catalog
    from tpu_workbench.bench.errors import WorkbenchError

    bad_price = tmp_path / "p.toml"
    bad_price.write_text(
        '# my prices\n\n[[price]]\nchip = "H100"\ntier = "custom"\nusd_per_chip_hour = -1\n'
        'source = "x"\ndate = "2026-01"\n'
    )
    with pytest.raises(CatalogError, match=r"p\.toml:3: 'H100 SXM' price must be a positive number"):
        load_catalog([bad_price])
    broken = tmp_path / "b.toml"
    broken.write_text("[[price]\n")
    with pytest.raises(CatalogError, match=r"b\.toml: not valid TOML: .*line 1"):
        load_catalog([broken])
    assert issubclass(CatalogError, WorkbenchError)
