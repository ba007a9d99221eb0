"""The compiled parts, both optional: the BM25 top-k kernel (src/hybridmem/retrieve/_bm25.c) and the
tokenizer's character scans (src/hybridmem/text/_scan.c). Where they cannot be built, hybridmem
scores BM25 with numpy and tokenizes with regular expressions (the same results, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hybridmem.retrieve._bm25",
            ["src/hybridmem/retrieve/_bm25.c"],
            # no fused multiply-add: the kernel's float32 weights are the numpy scorer's bits
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
            optional=True,
        ),
        Extension("hybridmem.text._scan", ["src/hybridmem/text/_scan.c"], extra_compile_args=["-O3"], optional=True),
    ]
)
