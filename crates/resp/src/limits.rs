//! How much a client may make the parser hold.
//!
//! Every length a client announces is checked against these numbers before
//! anything is allocated for it; the defaults are Redis's.

use crate::ProtocolError;

/// Bounds on what one request may claim. An inline command is held to the
/// same argument bounds as a multibulk one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest inline line, and longest `*<n>` / `$<n>` header line, before
    /// its terminator (Redis's `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub inline_max_bytes: usize,
    /// Longest argument (Redis's `proto-max-bulk-len`, 512 MiB).
    pub bulk_max_bytes: usize,
    /// Most arguments in one command.
    pub args_max: usize,
    /// Most arguments in one command before the client has authenticated
    /// (Redis: 10), so an anonymous client cannot make the server hold much.
    pub unauthenticated_args_max: usize,
    /// Longest argument before the client has authenticated (Redis: 16 KiB).
    pub unauthenticated_bulk_max_bytes: usize,
    /// Most bytes of arguments in one command, all of them together (Redis's
    /// `client-query-buffer-limit`, 1 GiB): without it, a command of many
    /// arguments each within `bulk_max_bytes` could still ask for terabytes.
    pub command_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            inline_max_bytes: 64 * 1024,
            bulk_max_bytes: 512 * 1024 * 1024,
            args_max: 1024 * 1024,
            unauthenticated_args_max: 10,
            unauthenticated_bulk_max_bytes: 16 * 1024,
            command_max_bytes: 1024 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// Checks the number of arguments a command claims or has. The general
    /// limit is checked first, as Redis does.
    pub(crate) fn check_arg_count(&self, count: usize, authenticated: bool) -> Result<(), ProtocolError> {
        if count > self.args_max {
            Err(ProtocolError::InvalidMultibulkLength)
        } else if !authenticated && count > self.unauthenticated_args_max {
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        } else {
            Ok(())
        }
    }

    /// Checks that an argument of `len` bytes after `so_far` bytes of the
    /// same command's arguments keeps the command within `command_max_bytes`.
    pub(crate) fn check_command_bytes(&self, so_far: usize, len: usize) -> Result<(), ProtocolError> {
        match so_far.checked_add(len) {
            Some(total) if total <= self.command_max_bytes => Ok(()),
            _ => Err(ProtocolError::CommandTooBig),
        }
    }

    /// Checks the length an argument claims or has.
    pub(crate) fn check_arg_bytes(&self, len: usize, authenticated: bool) -> Result<(), ProtocolError> {
        if len > self.bulk_max_bytes {
            Err(ProtocolError::InvalidBulkLength)
        } else if !authenticated && len > self.unauthenticated_bulk_max_bytes {
            Err(ProtocolError::UnauthenticatedBulkLength)
        } else {
            Ok(())
        }
    }
}
