//! Building Envoy protos from the IR.
