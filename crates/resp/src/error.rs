//! Why a request stream was refused.
//!
//! The Display texts are Redis's own (networking.c), so that a client sees
//! exactly what a real Redis would send after `-ERR `. Only
//! [`ProtocolError::BulkNotTerminated`] has no Redis counterpart: Redis skips
//! the two bytes after a bulk string without looking at them.
//!
//! Every error is final: the stream is no longer in sync, so the caller
//! replies with the error and closes the connection, as Redis does. The
//! parser does not try to recover.

/// A request that breaks the protocol or one of the [`Limits`](crate::Limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// `*<n>` is not an integer, or claims more than `args_max` arguments
    /// (for an inline command: it has more than `args_max` arguments).
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<n>` is not an integer, is negative, or claims more than
    /// `bulk_max_bytes` (for an inline command: an argument is longer).
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// The arguments of one command add up to more than `command_max_bytes`
    /// (Redis closes such a client for its query buffer, without a reply).
    #[error("Protocol error: command too big")]
    CommandTooBig,
    /// An argument of a multibulk request does not start with `$`.
    #[error("Protocol error: expected '$', got '{}'", Printable(*.got))]
    ExpectedBulk {
        /// The byte found where `$` belongs.
        got: u8,
    },
    /// An inline line grew past `inline_max_bytes` without a newline.
    #[error("Protocol error: too big inline request")]
    InlineTooBig,
    /// A `*<n>` header line grew past `inline_max_bytes` without a CR.
    #[error("Protocol error: too big mbulk count string")]
    MultibulkCountTooBig,
    /// A `$<n>` header line grew past `inline_max_bytes` without a CR.
    #[error("Protocol error: too big bulk count string")]
    BulkCountTooBig,
    /// An inline command has an unclosed quote, or a closing quote followed
    /// by something other than a space.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// The `<len>` bytes of a bulk string are not followed by CRLF: the
    /// claimed length is wrong, so nothing after it can be trusted.
    #[error("Protocol error: bulk string not followed by CRLF")]
    BulkNotTerminated,
    /// A client that has not authenticated sent more than
    /// `unauthenticated_args_max` arguments.
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// A client that has not authenticated sent an argument longer than
    /// `unauthenticated_bulk_max_bytes`.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
}

/// Shows a byte as Redis's `%c` would, except that a byte that is not
/// printable ASCII is escaped as `\xHH`: an error text must stay valid UTF-8
/// and on one line.
struct Printable(u8);

impl std::fmt::Display for Printable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_ascii_graphic() || self.0 == b' ' {
            write!(f, "{}", char::from(self.0))
        } else {
            write!(f, "\\x{:02x}", self.0)
        }
    }
}
