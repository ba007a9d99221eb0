"""The one compiled part: the BM25 top-k kernel (src/hybridmem/retrieve/_bm25.c). Optional: where
it cannot be built, hybridmem scores BM25 with numpy (the same results, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hybridmem.retrieve._bm25",
            ["src/hybridmem/retrieve/_bm25.c"],
            # no fused multiply-add: the kernel's float32 weights are the numpy scorer's bits
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
            optional=True,
        )
    ]
)
