"""Benchmarks: each measurement beside its baseline, in one process tree and one sitting."""
