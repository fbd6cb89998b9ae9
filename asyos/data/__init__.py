"""Data: the ``Dataset`` container, synthetic generators, file loading, sharding."""
from .dataset import Dataset
from .io import load_dataset
from .sharding import shard_columns, split_budget
from .synthetic import SyntheticSource, make_classification, make_regression

__all__ = ["Dataset", "SyntheticSource", "load_dataset", "make_classification", "make_regression",
           "shard_columns", "split_budget"]
