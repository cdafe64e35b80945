"""Only the optional C accelerator of the record walk lives here (metadata is in pyproject.toml). `optional=True`:
without a compiler the build goes on and tidelog uses the pure-Python walk."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tidelog.protocol._record_walk", ["tidelog/protocol/_record_walk.c"], optional=True)])
