//! `waymark node --config FILE`: one host, in the foreground, logging with `tracing` to stderr
//! (`RUST_LOG` sets the level; `info` by default). SIGTERM and SIGINT stop it cleanly: listeners
//! close, every vnode's log is synced, threads end.

use anyhow::{Context, Result};
use std::path::Path;
use tokio_util::sync::CancellationToken;
use waymark_server::config::NodeConfig;
use waymark_server::node::NodeError;

/// The exit status of a node that could not listen because another program holds one of its
/// ports (98 is Linux's EADDRINUSE): `cluster start` then writes the cluster again on new ports.
pub const EXIT_PORT_TAKEN: i32 = 98;

/// Runs the node; a port already in use ends the process with `EXIT_PORT_TAKEN`.
pub fn run(config: &Path) -> Result<()> {
    let result = serve(config);
    if let Err(e) = &result {
        let taken = e.chain().any(|cause| {
            matches!(cause.downcast_ref::<NodeError>(),
                Some(NodeError::Listen { source, .. }) if source.kind() == std::io::ErrorKind::AddrInUse)
        });
        if taken {
            eprintln!("Error: {e:#}");
            std::process::exit(EXIT_PORT_TAKEN);
        }
    }
    result
}

fn serve(config: &Path) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    let cfg = NodeConfig::load(config)?;
    let me = cfg.this_host().clone();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        tokio::spawn(stop_on_signal(shutdown.clone()));
        tracing::info!(
            host = %cfg.host, redis = %me.redis, peer = %me.peer, admin = %me.admin,
            data = %cfg.data_dir.display(), "starting"
        );
        waymark_server::node::run(cfg, shutdown).await.context("the node stopped")
    })?;
    tracing::info!("stopped");
    Ok(())
}

async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return tracing::error!("cannot install signal handlers: stop the node with SIGKILL");
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
    }
    shutdown.cancel();
}
