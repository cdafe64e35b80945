"""Only the optional C accelerators live here (metadata is in pyproject.toml): the record walk, the Produce
codec and the cleaner core. `optional=True`: without a compiler the build goes on and tidelog uses the pure-Python code."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("tidelog.protocol._record_walk", ["tidelog/protocol/_record_walk.c"], optional=True),
    Extension("tidelog.protocol._produce_codec", ["tidelog/protocol/_produce_codec.c"], optional=True),
    Extension("tidelog.protocol._cleaner_core", ["tidelog/protocol/_cleaner_core.c"], optional=True),
])
