"""Export and import: a store's memories as a versioned JSON Lines file and back, into either
backend (docs/export-format.md). ``migrate`` pipes the same records from one store into another."""

from .dump import ExportReport, records, write_export
from .format import FORMAT, FORMAT_VERSION
from .load import ImportReport, import_file, import_records, read_records
from .targets import export_store, export_to, import_into

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ExportReport",
    "ImportReport",
    "export_store",
    "export_to",
    "import_into",
    "import_file",
    "import_records",
    "read_records",
    "records",
    "write_export",
]
