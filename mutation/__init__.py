"""Mutation testing of the suite: plant bugs in src/wy_ascend and check that the tests and the fuzz
suite catch each one. ``mutants``: a hand-written catalog of known bug classes (``python -m mutation``);
``generated``: AST-generated mutants run with CI's commands (``python -m mutation --generated N``);
``equivalent.json``: survivors argued to change no behaviour. Not part of the installed package."""
