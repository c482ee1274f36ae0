//! Loading manifests from files and directories. (Being written.)
