//! The bank over the Redis protocol, shared by the commands that drive real clusters (`bench`;
//! the demo can use it too): a connection with timeouts, accounts opened in one transaction, and
//! one WATCH-guarded MULTI/EXEC transfer.

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// Every blocking read and write of a client gives up after this long.
pub const CLIENT_IO_TIMEOUT: Duration = Duration::from_secs(10);

/// How this process's Redis clients reach a cluster that asks for TLS or a password: set once,
/// by `bench` for the cluster it runs against; unset, clients speak plaintext without `AUTH`.
static CLIENT_AUTH: OnceLock<ClientAuth> = OnceLock::new();

struct ClientAuth {
    /// The cluster's CA certificate (PEM): TLS trusting it alone. `None`: plaintext.
    ca_pem: Option<Vec<u8>>,
    password: Option<String>,
}

/// From now on every connection of this process speaks TLS trusting `ca_pem` (if given) and
/// authenticates with `password` (if given). A process drives one cluster: the first call wins.
pub fn use_client_auth(ca_pem: Option<Vec<u8>>, password: Option<String>) {
    let _ = CLIENT_AUTH.set(ClientAuth { ca_pem, password });
}

/// A connection whose reads and writes time out, over TLS and authenticated if the cluster asks.
pub fn connect(addr: SocketAddr) -> redis::RedisResult<redis::Connection> {
    let client = match CLIENT_AUTH.get() {
        None => redis::Client::open(format!("redis://{addr}/"))?,
        Some(auth) => {
            let user = auth.password.as_ref().map(|p| format!(":{p}@")).unwrap_or_default();
            match &auth.ca_pem {
                None => redis::Client::open(format!("redis://{user}{addr}/"))?,
                Some(ca) => {
                    let certs = redis::TlsCertificates { client_tls: None, root_cert: Some(ca.clone()) };
                    redis::Client::build_with_tls(format!("rediss://{user}{addr}/"), certs)?
                }
            }
        }
    };
    let con = client.get_connection_with_timeout(CLIENT_IO_TIMEOUT)?;
    con.set_read_timeout(Some(CLIENT_IO_TIMEOUT))?;
    con.set_write_timeout(Some(CLIENT_IO_TIMEOUT))?;
    Ok(con)
}

/// Every account gets `balance`, in one transaction (MSET); returns the total.
pub fn open_accounts(addr: SocketAddr, accounts: &[String], balance: i64) -> Result<i64> {
    let mut con = connect(addr).with_context(|| format!("connecting to {addr}"))?;
    let mut mset = redis::cmd("MSET");
    for a in accounts {
        mset.arg(a).arg(balance);
    }
    mset.query::<()>(&mut con).context("opening the accounts")?;
    Ok(balance * accounts.len() as i64)
}

/// How one transfer attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    Committed,
    /// A WATCHed balance moved before EXEC: nothing was written; the caller may retry.
    Aborted,
    /// The payer's balance was too low: nothing was attempted.
    Declined,
}

/// One transfer: WATCH both accounts, read them, then MULTI/DECRBY/INCRBY/EXEC.
pub fn transfer(con: &mut redis::Connection, from: &str, to: &str, amount: i64) -> redis::RedisResult<Transfer> {
    redis::cmd("WATCH").arg(from).arg(to).query::<()>(con)?;
    let (balance, _): (Option<i64>, Option<i64>) = redis::cmd("MGET").arg(from).arg(to).query(con)?;
    if balance.unwrap_or(0) < amount {
        redis::cmd("UNWATCH").query::<()>(con)?;
        return Ok(Transfer::Declined);
    }
    let done: Option<(i64, i64)> =
        redis::pipe().atomic().cmd("DECRBY").arg(from).arg(amount).cmd("INCRBY").arg(to).arg(amount).query(con)?;
    Ok(if done.is_some() { Transfer::Committed } else { Transfer::Aborted })
}

/// The sum of `accounts`' balances, read in one MGET (one transaction) through `addr`; an account
/// missing is an error (a restored cluster must hold every one).
pub fn read_total(addr: SocketAddr, accounts: &[String]) -> Result<i64> {
    let mut con = connect(addr)?;
    let balances: Vec<Option<i64>> = redis::cmd("MGET").arg(accounts).query(&mut con)?;
    if balances.iter().any(Option::is_none) {
        anyhow::bail!("an account is missing in the restored cluster");
    }
    Ok(balances.into_iter().flatten().sum())
}
