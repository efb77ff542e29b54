"""Whether the MiniLM model may run its products in int8 here: read from the
CPU's flags, without loading the model (so this runs without --run-slow)."""

from brain_sql import minilm


def test_vnni_is_read_from_the_cpus_flags(tmp_path):
    """Without VNNI onnxruntime's AVX2 kernel sums pairs of int8 products in 16 bits
    and can saturate: the float32 graph runs there, and where the flags can't be read."""
    flags = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f{}\nbugs\t\t: spectre_v1 avx512_vnni\n"
    for extra, expected in (("", False), (" avx512_vnni", True), (" avx_vnni", True), (" avx512_vnnix", False)):
        (tmp_path / "cpuinfo").write_text(flags.format(extra))
        assert minilm.int8_products(tmp_path / "cpuinfo") is expected
    assert minilm.int8_products(tmp_path / "missing") is False
