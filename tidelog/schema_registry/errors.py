"""Confluent's REST errors: an HTTP status and a finer `error_code` (io.confluent...rest.exceptions.Errors)."""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 40901
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
INVALID_SUBJECT = 42208
SCHEMA_TOO_LARGE = 42209
STORE_ERROR = 50001


class RegistryError(Exception):
    def __init__(self, error_code: int, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status if status is not None else int(str(error_code)[:3])

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: object = None) -> RegistryError:
    return RegistryError(SCHEMA_NOT_FOUND, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(INVALID_VERSION, f"The specified version '{version}' is not a valid version id. "
                                          'Allowed values are between [1, 2^31-1] and the string "latest"')


def invalid_compatibility() -> RegistryError:
    return RegistryError(INVALID_COMPATIBILITY_LEVEL,
                         "Invalid compatibility level. Valid values are none, backward, forward, full, "
                         "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode() -> RegistryError:
    return RegistryError(INVALID_MODE, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE "
                                       "and IMPORT.")


def read_only(subject: str | None) -> RegistryError:
    scope = f"Subject {subject}" if subject is not None else "The registry"
    return RegistryError(OPERATION_NOT_PERMITTED, f"{scope} is in read-only mode")


def invalid_schema(reason: str) -> RegistryError:
    return RegistryError(INVALID_SCHEMA, f"Invalid schema {reason}" if not reason.startswith("Invalid") else reason)
