"""The fuzz suite: Hypothesis strategies, run profiles and one test per property (see conftest.py)."""
