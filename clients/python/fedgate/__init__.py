"""fedgate's Python client: batch GETs (many objects or shard members in one
request, one tar stream in request order) and a PyTorch dataset over them.

    import boto3, fedgate
    s3 = boto3.client("s3", endpoint_url="http://fedgate.gpu-east:9000")
    for name, data in fedgate.batch_get(s3, [("train", "a.jpg"), ("train", "b.jpg")]):
        ...

fedgate.open_local reads an object through a node's Unix socket without a
copy through the gateway (short-circuit; docs/gpu-data-path.md).

fedgate.dataset.FedgateBatchDataset needs torch (imported only there).
docs/training.md in the fedgate repository documents the endpoint.
"""

from .batch import (
    BatchClient,
    BatchEntryError,
    BatchError,
    BatchStreamError,
    FedgateError,
    entry_name,
    make_entry,
)
from .local import LocalReadError, open_local

__version__ = "0.1.0"

__all__ = [
    "BatchClient",
    "BatchEntryError",
    "BatchError",
    "BatchStreamError",
    "FedgateError",
    "LocalReadError",
    "batch_get",
    "entry_name",
    "make_entry",
    "open_local",
]


def batch_get(target, entries, *, continue_on_error=False, bucket=None, **client_kwargs):
    """Yields (name, bytes) per entry, in request order (BatchClient.batch_get).

    target: a BatchClient, a boto3 S3 client, or an endpoint URL (then
    client_kwargs, e.g. session= or credentials=, go to BatchClient).
    Making a BatchClient once and reusing it keeps its connections.
    """
    if isinstance(target, BatchClient):
        return target.batch_get(entries, continue_on_error=continue_on_error, bucket=bucket)
    return _closing(BatchClient(target, **client_kwargs), entries, continue_on_error, bucket)


def _closing(client, entries, continue_on_error, bucket):
    with client:
        yield from client.batch_get(entries, continue_on_error=continue_on_error, bucket=bucket)
