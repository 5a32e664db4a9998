"""Moved to :mod:`deltadv.spark.datasource`; this module re-exports it so
``from deltadv.datasource import register_data_source`` keeps working."""

from deltadv.spark.datasource import *  # noqa: F403
from deltadv.spark.datasource import (  # noqa: F401  (names tests and users import)
    CHANGE_COLUMNS,
    FORMAT_NAME,
    PUSHDOWN_CONF,
    __all__,
    _split_size,
    _storage_options,
    _table_uri,
    _version_option,
)
