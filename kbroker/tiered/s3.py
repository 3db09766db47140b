"""The S3 store: the archive in an S3-compatible object store (the `s3` extra: boto3).

Objects are keyed `<s3.prefix><topic>-<topic id>/<partition>/<object name>`. A PUT is atomic, so
an object is either whole or absent; the manifest written after the segment's objects is the
commit point, as for the directory store. Reads are ranged GETs bounded by the fetch's max bytes.

Settings (under rsm.config.): `s3.bucket` (required), `s3.endpoint.url` (an S3-compatible
service: MinIO, Ceph, moto...), `s3.region`, `s3.access.key.id` / `s3.secret.access.key`
(else boto3's own credential chain), `s3.prefix`, `s3.path.style.access` (true for most
S3-compatible services).
"""

from __future__ import annotations

import os

from kbroker.tiered.manifest import RemoteSegment
from kbroker.tiered.store import LOG, MANIFEST_NAME, TXN_INDEX, RemoteStorageManager, SegmentData, StoreError

__all__ = ["S3RemoteStorageManager"]

_MULTIPART_CHUNK = 64 * 1024 * 1024


class _FdReader:
    """A file-like view of `size` bytes from position 0 of an fd, for boto3's uploads."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size, self.position = fd, size, 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.position
        n = min(n, self.size - self.position)
        data = os.pread(self.fd, n, self.position) if n > 0 else b""
        self.position += len(data)
        return data

    def seek(self, position: int, whence: int = 0) -> int:
        self.position = {0: position, 1: self.position + position, 2: self.size + position}[whence]
        return self.position

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        """The fd is the caller's to close."""


class S3RemoteStorageManager(RemoteStorageManager):
    def __init__(self, settings: dict[str, str]) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:
            raise StoreError("the S3 store needs boto3: pip install 'kbroker[s3]'") from exc
        self.bucket = settings.get("s3.bucket")
        if not self.bucket:
            raise StoreError("the S3 store needs rsm.config.s3.bucket")
        self.prefix = settings.get("s3.prefix", "")
        path_style = settings.get("s3.path.style.access", "false").lower() == "true"
        self.client = boto3.client(
            "s3", endpoint_url=settings.get("s3.endpoint.url") or None, region_name=settings.get("s3.region") or None,
            aws_access_key_id=settings.get("s3.access.key.id") or None,
            aws_secret_access_key=settings.get("s3.secret.access.key") or None,
            config=Config(s3={"addressing_style": "path" if path_style else "auto"},
                          retries={"max_attempts": 3, "mode": "standard"}))
        from boto3.s3.transfer import TransferConfig

        self._transfer = TransferConfig(multipart_threshold=_MULTIPART_CHUNK, multipart_chunksize=_MULTIPART_CHUNK,
                                        use_threads=False)

    def _key(self, partition: str, name: str) -> str:
        return f"{self.prefix}{partition}/{name}"

    def _missing(self, exc: Exception) -> bool:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        return code in ("NoSuchKey", "404", "NotFound")

    def copy_log_segment(self, partition: str, segment: RemoteSegment, data: SegmentData) -> None:
        for suffix, content in data.indexes.items():
            if content or suffix != TXN_INDEX:
                self.client.put_object(Bucket=self.bucket, Key=self._key(partition, segment.name + suffix), Body=content)
        self.client.upload_fileobj(_FdReader(data.log_fd, data.log_size), self.bucket,
                                   self._key(partition, segment.name + LOG), Config=self._transfer)

    def fetch_log_segment(self, partition: str, segment: RemoteSegment, position: int, size: int) -> bytes:
        if size <= 0:
            return b""
        answer = self.client.get_object(Bucket=self.bucket, Key=self._key(partition, segment.name + LOG),
                                        Range=f"bytes={position}-{position + size - 1}")
        return answer["Body"].read()

    def _get(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as exc:  # botocore's ClientError; its class lives on the client
            if self._missing(exc):
                return None
            raise

    def fetch_index(self, partition: str, segment: RemoteSegment, suffix: str) -> bytes:
        return self._get(self._key(partition, segment.name + suffix)) or b""

    def list_objects(self, partition: str) -> list[tuple[str, int]]:
        prefix = self._key(partition, "")
        out = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", ()):
                out.append((item["Key"][len(prefix):], int(item["LastModified"].timestamp() * 1000)))
        return out

    def delete_objects(self, partition: str, names: list[str]) -> None:
        for i in range(0, len(names), 1000):
            batch = [{"Key": self._key(partition, n)} for n in names[i:i + 1000]]
            if batch:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})

    def read_manifest(self, partition: str) -> bytes | None:
        return self._get(self._key(partition, MANIFEST_NAME))

    def write_manifest(self, partition: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(partition, MANIFEST_NAME), Body=data)

    def close(self) -> None:
        self.client.close()
