"""Host-side data loading and saving (docs/design.md, "io"): SVMlight/LETOR text, LightGBM
group files, preference-pair files, query-id remapping, query-wise min-max normalisation,
chunked readers for the stream and model files. numpy/scipy only, no jit.

One module per concern: ``files`` (decompression, atomic writes), ``svmlight``,
``chunks``, ``groups`` and ``models``.
"""
from .._core.queries import segment_ids as segment_ids
from .chunks import iter_npy as iter_npy
from .chunks import iter_svmlight as iter_svmlight
from .groups import groups_to_qid as groups_to_qid
from .groups import normalize_per_query as normalize_per_query
from .groups import qid_to_groups as qid_to_groups
from .groups import read_groups as read_groups
from .groups import read_preferences as read_preferences
from .groups import to_bcoo as to_bcoo
from .groups import write_groups as write_groups
from .groups import write_preferences as write_preferences
from .models import MODEL_FORMAT as MODEL_FORMAT
from .models import MODEL_VERSION as MODEL_VERSION
from .models import load_model as load_model
from .models import save_model as save_model
from .svmlight import Dataset as Dataset
from .svmlight import read_svmlight as read_svmlight
from .svmlight import write_svmlight as write_svmlight

__all__ = ["Dataset", "read_svmlight", "write_svmlight", "read_groups", "write_groups",
           "groups_to_qid", "qid_to_groups", "read_preferences", "write_preferences",
           "normalize_per_query", "to_bcoo", "segment_ids", "save_model", "load_model",
           "MODEL_FORMAT", "MODEL_VERSION", "iter_npy", "iter_svmlight"]
