"""The Chakra execution-trace messages (MLCommons Chakra's ``et_def.proto`` field numbers), built at run
time with ``protobuf`` into a private descriptor pool, and the length-delimited stream they travel in.

``ccviz/data/chakra/et_def.proto`` describes the same records as a .proto file; the tests compile it with
protoc and check that both describe identical messages. A private pool keeps these classes apart from a
Chakra module another package may have registered in protobuf's default pool.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ccviz.errors import CcvizError

PACKAGE = "ChakraProtoMsg"
# NodeType and CollectiveCommType values of the published schema.
NODE_TYPES = {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3, "COMP_NODE": 4,
              "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7}
COLLECTIVE_TYPES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4, "BROADCAST": 5,
                    "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9}
# AttributeProto's oneof ``value``: (field, number, scalar type); each scalar's list message is number + 1.
SCALARS = (("double", 3, "DOUBLE"), ("float", 5, "FLOAT"), ("int32", 7, "INT32"), ("int64", 9, "INT64"),
           ("uint32", 11, "UINT32"), ("uint64", 13, "UINT64"), ("sint32", 15, "SINT32"), ("sint64", 17, "SINT64"),
           ("fixed32", 19, "FIXED32"), ("fixed64", 21, "FIXED64"), ("sfixed32", 23, "SFIXED32"),
           ("sfixed64", 25, "SFIXED64"), ("bool", 27, "BOOL"), ("string", 29, "STRING"), ("bytes", 31, "BYTES"))
MAX_RECORD_BYTES = 64 << 20  # one Node or GlobalMetadata larger than this is not a trace record


def _list_name(scalar: str) -> str:
    return {"uint32": "Uint32", "uint64": "Uint64", "sint32": "Sint32", "sint64": "Sint64", "sfixed32": "Sfixed32",
            "sfixed64": "Sfixed64", "fixed32": "Fixed32", "fixed64": "Fixed64"}.get(scalar, scalar.capitalize()) \
        + "List"


@cache
def messages() -> dict[str, Any]:
    """``{"GlobalMetadata": class, "Node": class, "AttributeProto": class, ...}``."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="ccviz_chakra_et_def.proto", package=PACKAGE, syntax="proto3")

    def message(name: str, fields: list[tuple], oneof: str | None = None) -> None:
        m = fdp.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for field_name, number, kind, repeated, type_name, in_oneof in fields:
            f = m.field.add(name=field_name, number=number, type=getattr(F, "TYPE_" + kind),
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = f".{PACKAGE}.{type_name}"
            if in_oneof:
                f.oneof_index = 0

    attr_fields: list[tuple] = [("name", 1, "STRING", False, None, False), ("doc_string", 2, "STRING", False, None, False)]
    for scalar, number, kind in SCALARS:
        attr_fields.append((f"{scalar}_val", number, kind, False, None, True))
        attr_fields.append((f"{scalar}_list", number + 1, "MESSAGE", False, _list_name(scalar), True))
        message(_list_name(scalar), [("values", 1, kind, True, None, False)])
    message("AttributeProto", attr_fields, oneof="value")
    message("GlobalMetadata", [("version", 1, "STRING", False, None, False),
                               ("attr", 2, "MESSAGE", True, "AttributeProto", False)])
    message("IOInfo", [(n, i, "STRING", False, None, False) for i, n in enumerate(("values", "shapes", "types"), 1)])
    for enum_name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVE_TYPES)):
        e = fdp.enum_type.add(name=enum_name)
        for value_name, number in values.items():
            e.value.add(name=value_name, number=number)
    message("Node", [("id", 1, "UINT64", False, None, False), ("name", 2, "STRING", False, None, False),
                     ("type", 3, "ENUM", False, "NodeType", False), ("ctrl_deps", 4, "UINT64", True, None, False),
                     ("data_deps", 5, "UINT64", True, None, False),
                     ("start_time_micros", 6, "UINT64", False, None, False),
                     ("duration_micros", 7, "UINT64", False, None, False),
                     ("inputs", 8, "MESSAGE", False, "IOInfo", False), ("outputs", 9, "MESSAGE", False, "IOInfo", False),
                     ("attr", 10, "MESSAGE", True, "AttributeProto", False)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{m.name}"))
            for m in fdp.message_type}


def file_descriptor_proto():
    """The descriptor the classes above were built from (the tests compare it with protoc's)."""
    from google.protobuf import descriptor_pb2

    out = descriptor_pb2.FileDescriptorProto()
    messages()["Node"].DESCRIPTOR.file.CopyToProto(out)
    return out


# ------------------------------------------------------------------ the length-delimited stream
def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_stream(records: list) -> bytes:
    """Each message preceded by its byte count as a varint (Chakra's file encoding)."""
    parts = []
    for record in records:
        data = record.SerializeToString()
        parts.append(varint(len(data)))
        parts.append(data)
    return b"".join(parts)


def split_stream(data: bytes, name: str) -> list[bytes]:
    """The records of a length-delimited stream, each as its bytes; a broken prefix or length is one line
    naming the byte where it goes wrong."""
    records: list[bytes] = []
    pos = 0
    while pos < len(data):
        start, length, shift = pos, 0, 0
        while True:
            if pos >= len(data):
                raise CcvizError(f"chakra: {name}: the length prefix at byte {start} is cut off (a truncated file?)",
                                 "chakra")
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
            if shift > 63:
                raise CcvizError(f"chakra: {name}: the length prefix at byte {start} is not a varint", "chakra")
        if length > MAX_RECORD_BYTES or pos + length > len(data):
            raise CcvizError(f"chakra: {name}: record {len(records)} at byte {start} claims {length} bytes but the file "
                             f"has {len(data) - pos} left (truncated, or not a Chakra ET)", "chakra")
        records.append(data[pos:pos + length])
        pos += length
    if not records:
        raise CcvizError(f"chakra: {name} is empty; a Chakra ET starts with its GlobalMetadata", "chakra")
    return records


def decode_stream(data: bytes, name: str) -> tuple[Any, list]:
    """``(GlobalMetadata, [Node, ...])`` from a Chakra ET file's bytes; a malformed file is one line."""
    from google.protobuf.message import DecodeError

    classes = messages()
    out = []
    for i, raw in enumerate(split_stream(data, name)):
        record = (classes["GlobalMetadata"] if i == 0 else classes["Node"])()
        try:
            record.ParseFromString(raw)
        except DecodeError as exc:
            what = "GlobalMetadata" if i == 0 else "Node"
            raise CcvizError(f"chakra: {name}: record {i} is not a Chakra {what} ({exc})", "chakra") from None
        out.append(record)
    return out[0], out[1:]


def attribute(name: str, value: Any, kind: str | None = None):
    """An AttributeProto: ``kind`` names the oneof field (int64_val, string_val, ...), guessed from the value."""
    attr = messages()["AttributeProto"](name=name)
    if kind is None:
        kind = "bool_val" if isinstance(value, bool) else "int64_val" if isinstance(value, int) else \
            "double_val" if isinstance(value, float) else "string_val"
    if kind.endswith("_list"):
        getattr(attr, kind).values.extend(value)
    else:
        setattr(attr, kind, value)
    return attr


def attributes(record) -> dict[str, Any]:
    """A record's attributes as ``{name: value}`` (lists as Python lists)."""
    out = {}
    for attr in record.attr:
        kind = attr.WhichOneof("value")
        if kind is None:
            continue
        value = getattr(attr, kind)
        out[attr.name] = list(value.values) if kind.endswith("_list") else value
    return out
