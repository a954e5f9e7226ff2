"""Reads a Perfetto protobuf trace the way a second, independent reader would, and checks its
structure (docs/perfetto-trace.md). The bytes are decoded by `protoc --decode` against
tests/perfetto/perfetto_trace_subset.proto (Debian's protobuf-compiler); this module parses protoc's
text output and checks what Perfetto's trace processor relies on:

- the file starts with byte 0x0A (a Trace's packet field), protoc decodes it without an unknown or
  mistyped field, and `protoc --decode_raw` shows every flow id as fixed64 (never packed);
- every TrackEvent packet has a sequence id and a timestamp; each sequence's first packet clears its
  incremental state; packets using interned ids say they need it; every iid is defined on its
  sequence at or before its first use, once;
- timestamps (deltas on a sequence's incremental clock 64) rebuild to absolute ns below 2^63;
- every track an event names has a descriptor; track uuids are unique; a child track's parent
  exists; process pids are unique and never 0;
- on each track, BEGIN and END pair up and nest (an END closes the innermost open slice, never
  before it began), nothing stays open;
- every flow id is on exactly two slices: a BEGIN (the last arriver's) and an END (a participant's)
  that is not before that BEGIN (the arrow runs forward in time);
- COUNTER events are only on counter tracks and carry a value.

`read_trace(path)` returns a Trace: the slices (with names, categories, args, flows resolved),
the instants, the counters and the tracks, for tests to compare against the Chrome JSON export.
"""
import collections
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "perfetto")
PROTO = os.path.join(PROTO_DIR, "perfetto_trace_subset.proto")

_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(?:\s*:\s*(.*)|\s*\{)\s*$")
_UNKNOWN = re.compile(r"^\s*[0-9]+\s*[:{]")
_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))")
_SIMPLE = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"'": b"'", b'"': b'"', b"\\": b"\\", b"a": b"\a", b"b": b"\b",
           b"f": b"\f", b"v": b"\v", b"?": b"?"}


class TraceError(AssertionError):
    pass


def _unquote(text):
    """A protoc text-format string literal -> str (its bytes C-escaped, then UTF-8)."""
    raw = text[1:-1].encode("utf-8")

    def sub(m):
        if m.group(1):
            return bytes([int(m.group(1), 8)])
        if m.group(2):
            return bytes([int(m.group(2), 16)])
        return _SIMPLE.get(m.group(3), m.group(3))

    data = _ESCAPE.sub(sub, raw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(f"a string is not valid UTF-8 ({e}): {text[:80]}")


def _value(text):
    if text.startswith('"'):
        return _unquote(text)
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    return text  # an enum name


def parse_text(text):
    """protoc's text format -> nested dicts: field name -> list of values (ints, strs, bools, dicts)."""
    root = collections.defaultdict(list)
    stack = [root]
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.strip() == "}":
            stack.pop()
            continue
        if _UNKNOWN.match(line):
            raise TraceError(f"protoc output line {n}: an unknown or mistyped field: {line.strip()}")
        m = _LINE.match(line)
        if not m:
            raise TraceError(f"protoc output line {n}: cannot parse: {line.strip()}")
        name, value = m.group(1), m.group(2)
        if value is None:
            child = collections.defaultdict(list)
            stack[-1][name].append(child)
            stack.append(child)
        else:
            stack[-1][name].append(_value(value))
    if len(stack) != 1:
        raise TraceError("protoc output: unbalanced braces")
    return root


def one(msg, field, default=None):
    values = msg.get(field, [])
    if len(values) > 1:
        raise TraceError(f"field {field} appears {len(values)} times in one message")
    return values[0] if values else default


def decode(path):
    """The packets of the trace at `path`, decoded by protoc; checks the raw encoding first."""
    with open(path, "rb") as f:
        first = f.read(1)
    if first != b"\x0a":
        raise TraceError(f"{path}: first byte {first!r}, expected 0x0a (Trace.packet)")
    with open(path, "rb") as f:
        p = subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", "--decode=commprof_check.Trace", PROTO], stdin=f,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise TraceError(f"{path}: protoc --decode failed: {p.stderr.strip()}")
    with open(path, "rb") as f:
        raw = subprocess.run(["protoc", "--decode_raw"], stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, errors="replace")
    if raw.returncode != 0:
        raise TraceError(f"{path}: protoc --decode_raw failed: {raw.stderr.strip()}")
    for line in raw.stdout.splitlines():
        s = line.strip()
        if s.startswith("47:") and not re.fullmatch(r"47: 0x[0-9a-f]{16}", s):
            raise TraceError(f"{path}: a flow id not written as fixed64: {s}")
    return parse_text(p.stdout).get("packet", [])


Slice = collections.namedtuple("Slice", "pid track name category start end args flows_begin flows_end")


class Trace:
    def __init__(self):
        self.tracks = {}  # uuid -> descriptor dict
        self.slices = []
        self.instants = []
        self.counters = []  # (pid, track name, ts, value)
        self.facts = {}  # the "commprof trace" instant's args
        self.packets = 0

    def track_name(self, uuid):
        return one(self.tracks[uuid], "name", "")

    def pid_of(self, uuid):
        d = self.tracks[uuid]
        proc = one(d, "process")
        if proc is not None:
            return one(proc, "pid")
        parent = one(d, "parent_uuid")
        return self.pid_of(parent) if parent is not None else None


def _annotation_value(ann, resolve_string):
    for key in ("uint_value", "int_value", "bool_value", "string_value"):
        if key in ann:
            return one(ann, key)
    if "string_value_iid" in ann:
        return resolve_string(one(ann, "string_value_iid"))
    if "array_values" in ann:
        return tuple(_annotation_value(a, resolve_string) for a in ann["array_values"])
    raise TraceError(f"a debug annotation without a value: {dict(ann)}")


def read_trace(path):
    packets = decode(path)
    t = Trace()
    t.packets = len(packets)
    sequences = {}
    events = []  # (ts, order, track, type, payload)
    for order, p in enumerate(packets):
        seq = one(p, "trusted_packet_sequence_id")
        flags = one(p, "sequence_flags", 0)
        d = one(p, "track_descriptor")
        if d is not None:
            uuid = one(d, "uuid")
            if uuid in t.tracks:
                raise TraceError(f"packet {order}: track uuid {uuid} described twice")
            t.tracks[uuid] = d
        state = sequences.get(seq)
        if flags & 1:
            state = sequences[seq] = {"interned": collections.defaultdict(dict), "defaults": None, "clock": None,
                                      "last": None}
        elif state is None and seq is not None:
            state = sequences[seq] = {"interned": None, "defaults": None, "clock": None, "last": None}
        if flags & 2 and (state is None or state["interned"] is None):
            raise TraceError(f"packet {order}: sequence {seq} needs incremental state it never cleared")
        defaults = one(p, "trace_packet_defaults")
        if defaults is not None:
            state["defaults"] = defaults
        snap = one(p, "clock_snapshot")
        if snap is not None:
            for c in snap.get("clocks", []):
                if one(c, "clock_id") == 64:
                    if not one(c, "is_incremental", False):
                        raise TraceError(f"packet {order}: clock 64 must be incremental")
                    state["clock"] = state["last"] = one(c, "timestamp")
        interned = one(p, "interned_data")
        if interned is not None:
            if state is None or state["interned"] is None:
                raise TraceError(f"packet {order}: interned data on sequence {seq} before its state was cleared")
            for space in ("event_categories", "event_names", "debug_annotation_names",
                          "debug_annotation_string_values"):
                for entry in interned.get(space, []):
                    iid = one(entry, "iid")
                    if iid in state["interned"][space]:
                        raise TraceError(f"packet {order}: {space} iid {iid} defined twice on sequence {seq}")
                    state["interned"][space][iid] = one(entry, "name", one(entry, "str"))
        te = one(p, "track_event")
        if te is None:
            continue
        if seq is None or "timestamp" not in p:
            raise TraceError(f"packet {order}: a track event without sequence id or timestamp")
        ts = one(p, "timestamp")
        clock_id = one(state["defaults"], "timestamp_clock_id") if state and state["defaults"] else None
        if clock_id == 64:
            if state["last"] is None:
                raise TraceError(f"packet {order}: a delta timestamp before the sequence's clock snapshot")
            ts = state["last"] + ts
            state["last"] = ts
        if ts >= 2 ** 63:
            raise TraceError(f"packet {order}: timestamp {ts} >= 2^63")

        def resolve(space, iid, what):
            table = state["interned"][space] if state and state["interned"] is not None else {}
            if iid not in table:
                raise TraceError(f"packet {order}: {what} iid {iid} used before it was defined on sequence {seq}")
            return table[iid]

        track = one(te, "track_uuid")
        if track is None and state and state["defaults"]:
            ted = one(state["defaults"], "track_event_defaults")
            track = one(ted, "track_uuid") if ted else None
        if track is None:
            raise TraceError(f"packet {order}: a track event on no track")
        kind = one(te, "type")
        name = one(te, "name")
        if "name_iid" in te:
            name = resolve("event_names", one(te, "name_iid"), "name")
        cats = [resolve("event_categories", c, "category") for c in te.get("category_iids", [])]
        args = {}
        for ann in te.get("debug_annotations", []):
            key = one(ann, "name")
            if "name_iid" in ann:
                key = resolve("debug_annotation_names", one(ann, "name_iid"), "argument name")
            args[key] = _annotation_value(
                ann, lambda i: resolve("debug_annotation_string_values", i, "argument string"))
        payload = {"name": name, "category": cats[0] if cats else None, "args": args,
                   "flows": list(te.get("flow_ids", [])), "value": one(te, "counter_value")}
        events.append((ts, order, track, kind, payload))

    pids = {}
    for uuid, d in t.tracks.items():
        parent = one(d, "parent_uuid")
        if parent is not None and parent not in t.tracks:
            raise TraceError(f"track {uuid}: parent {parent} has no descriptor")
        proc = one(d, "process")
        if proc is not None:
            pid = one(proc, "pid")
            if pid in (None, 0) or pid in pids:
                raise TraceError(f"track {uuid}: process pid {pid} (0, missing or already used)")
            pids[pid] = uuid

    events.sort(key=lambda e: (e[0], e[1]))
    open_by_track = collections.defaultdict(list)
    flow_ends = collections.defaultdict(list)
    for ts, order, track, kind, payload in events:
        if track not in t.tracks:
            raise TraceError(f"packet {order}: track {track} has no descriptor")
        if kind == "TYPE_SLICE_BEGIN":
            open_by_track[track].append((ts, payload))
            if len(open_by_track[track]) > 512:
                raise TraceError(f"track {track}: more than 512 nested slices")
        elif kind == "TYPE_SLICE_END":
            if not open_by_track[track]:
                raise TraceError(f"packet {order}: an END on track {track} with no slice open")
            start, begin = open_by_track[track].pop()
            if ts < start:
                raise TraceError(f"packet {order}: a slice ends at {ts}, before it began at {start}")
            s = Slice(t.pid_of(track), track, begin["name"], begin["category"], start, ts, begin["args"],
                      begin["flows"], payload["flows"])
            t.slices.append(s)
            for f in begin["flows"]:
                flow_ends[f].append(("begin", s))
            for f in payload["flows"]:
                flow_ends[f].append(("end", s))
        elif kind == "TYPE_INSTANT":
            if payload["name"] == "commprof trace":
                t.facts = payload["args"]
                continue
            t.instants.append((t.pid_of(track), track, payload["name"], payload["category"], ts, payload["args"]))
            if payload["flows"]:
                raise TraceError(f"packet {order}: a flow on an instant")
        elif kind == "TYPE_COUNTER":
            if one(t.tracks[track], "counter") is None:
                raise TraceError(f"packet {order}: a counter value on track {track}, not a counter track")
            if payload["value"] is None:
                raise TraceError(f"packet {order}: a counter event without a value")
            t.counters.append((t.pid_of(track), t.track_name(track), ts, payload["value"]))
        else:
            raise TraceError(f"packet {order}: event type {kind}")
    for track, stack in open_by_track.items():
        if stack:
            raise TraceError(f"track {track}: {len(stack)} slice(s) never ended")
    t.flows = {}
    for fid, ends in flow_ends.items():
        sides = sorted(side for side, _ in ends)
        if sides != ["begin", "end"]:
            raise TraceError(f"flow {fid}: on {len(ends)} slice end(s) {sides}, expected one BEGIN and one END")
        src, dst = next(s for side, s in ends if side == "begin"), next(s for side, s in ends if side == "end")
        if dst.end < src.start:
            raise TraceError(f"flow {fid}: lands at {dst.end}, before the slice it leaves began ({src.start})")
        t.flows[fid] = (src, dst)
    return t
