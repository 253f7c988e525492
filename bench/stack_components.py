"""Waymark's parts as the bench scripts' CPU profiles name them (bench/flamegraph.sh and
bench/where-time-goes.sh): each folded stack counts under the first part one of its frames names,
read from the leaf up, so that e.g. the TCP send inside a peer write counts as the peer write."""

COMPONENTS = [
    ("log fsync", ["LogWriter::sync", "Wal::sync"]),
    ("log append", ["LogWriter::append"]),
    ("peer link: write", ["Outgoing::", "Router::flush", "peer::run::{{closure}}::{{closure}}", "sink::"]),
    ("peer link: read, decode, hand to a vnode", ["Router::deliver", "frame::decode", "codec::framed_impl"]),
    ("vnode thread: route a message", ["Router::send"]),
    ("Redis sessions", ["resp::"]),
    ("protocol code (Vnode::step)", ["Vnode::step", "ManagerVnode::step"]),
    ("vnode thread: driver, queue, timers", ["Driver<M>"]),
    ("runtime: parking, waking, polling", ["park", "epoll", "futex", "Context::run"]),
]
