"""Only the optional C accelerators live here (metadata is in pyproject.toml): the record walk, the Produce
codec and the cleaner core. `optional=True`: without a compiler the build goes on and tidelog uses the pure-Python code."""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    """TIDELOG_REQUIRE_ACCELERATORS=1 (release wheels, the Docker image) makes every Extension required: one that
    does not compile fails the build instead of shipping the pure-Python paths. Each accelerator is one
    `Extension("dotted.name", ...)` below; tidelog.accelerators reads the names from here, nothing else lists them."""

    def build_extensions(self) -> None:
        if os.environ.get("TIDELOG_REQUIRE_ACCELERATORS") == "1":
            for ext in self.extensions:
                ext.optional = False
        super().build_extensions()


setup(cmdclass={"build_ext": BuildExt}, ext_modules=[
    Extension("tidelog.protocol._record_walk", ["tidelog/protocol/_record_walk.c"], optional=True),
    Extension("tidelog.protocol._produce_codec", ["tidelog/protocol/_produce_codec.c"], optional=True),
    Extension("tidelog.protocol._cleaner_core", ["tidelog/protocol/_cleaner_core.c"], optional=True),
])
