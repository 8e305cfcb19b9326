//! Quickstart, MPI variant: many atmospheric columns relaxed toward a radiative-equilibrium
//! profile read from the `column_forcing` artifact, spread over the ranks of `MPI_COMM_WORLD`.
//!
//! ```text
//! cargo build -p quickstart-mpi --features mpi
//! mpirun -n 4 target/debug/quickstart-mpi [--columns 64] [--days 60] [--report DIR]
//! ```
//!
//! `clima_artifact!(.., ctx)` is **collective**: every rank calls it, rank 0 alone installs the
//! data (one download however many ranks), and every rank gets the same path or the same error.
//! At the end the provenance records of all ranks are gathered and rank 0 writes one report.
//! Built without the `mpi` feature, the same program runs serially with the `Singleton` context.
//!
//! Like the serial quickstart, it installs into `target/quickstart-depot` unless
//! `CLIMA_ARTIFACTS_DEPOT_PATH` names another depot, so trying it leaves nothing in `~/.cache`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[cfg(not(feature = "mpi"))]
use clima_artifact_runtime::Singleton;
use clima_artifact_runtime::{Context, clima_artifact, report};

/// One pressure level of the forcing data.
struct Level {
    pressure_hpa: f64,
    equilibrium_k: f64,
    relaxation_days: f64,
}

/// Command-line settings.
struct Settings {
    columns: usize,
    days: usize,
    report: PathBuf,
}

fn parse_args() -> Result<Settings, String> {
    let mut s = Settings {
        columns: 64,
        days: 60,
        report: std::env::temp_dir().join("quickstart-mpi-provenance/"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| args.next().ok_or(format!("{a} needs {what}"));
        match a.as_str() {
            "--columns" => s.columns = value("a number")?.parse().map_err(|e| format!("{e}"))?,
            "--days" => s.days = value("a number")?.parse().map_err(|e| format!("{e}"))?,
            "--report" => s.report = value("a directory")?.into(),
            other => return Err(format!("unknown argument `{other}`; see the source header")),
        }
    }
    Ok(s)
}

fn main() -> ExitCode {
    #[cfg(feature = "mpi")]
    let universe = clima_artifact_runtime::mpi::initialize().expect("MPI initialised twice");
    #[cfg(feature = "mpi")]
    let ctx: Box<dyn Context> = Box::new(clima_artifact_runtime::MpiContext::world());
    #[cfg(not(feature = "mpi"))]
    let ctx: Box<dyn Context> = Box::new(Singleton);

    let code = match parse_args()
        .map_err(Into::into)
        .and_then(|s| run(ctx.as_ref(), &s))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rank {}: error: {e}", ctx.rank());
            ExitCode::FAILURE
        }
    };
    drop(ctx);
    #[cfg(feature = "mpi")]
    drop(universe);
    code
}

fn run(ctx: &dyn Context, settings: &Settings) -> Result<(), Box<dyn std::error::Error>> {
    let (rank, size) = (ctx.rank(), ctx.size());
    if size == 1 && !cfg!(feature = "mpi") {
        println!("serial run (build with `--features mpi` and start with `mpirun -n 4` for MPI)");
    }

    choose_depot(rank)?;

    // Collective: every rank asks, rank 0 fetches, everyone gets the same path.
    let profile = clima_artifact!("column_forcing/equilibrium_profile.csv", ctx)?;
    let levels = read_levels(&profile)?;

    // Columns are dealt round-robin; each starts from a different perturbed state.
    let mine: Vec<usize> = (rank..settings.columns).step_by(size).collect();
    let mut columns: Vec<Vec<f64>> = mine
        .iter()
        .map(|&c| {
            let bump = 15.0 * (c as f64 * 0.7).sin();
            levels.iter().map(|l| l.equilibrium_k + bump).collect()
        })
        .collect();
    let before = departure(&columns, &levels);
    let dt_days = 0.25;
    for _ in 0..(settings.days as f64 / dt_days) as usize {
        for column in &mut columns {
            for (t, l) in column.iter_mut().zip(&levels) {
                *t -= dt_days * (*t - l.equilibrium_k) / l.relaxation_days;
            }
        }
    }
    let after = departure(&columns, &levels);

    // Global diagnostics: sums of squared departures, summed on the way to the root (a tree:
    // the root receives about log2(ranks) messages of 24 bytes, however many ranks there are).
    let local = [before.0, after.0, before.1 as f64]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let add = |a: Vec<u8>, b: Vec<u8>| -> Vec<u8> {
        a.chunks_exact(8)
            .zip(b.chunks_exact(8))
            .flat_map(|(x, y)| {
                let x = f64::from_le_bytes(x.try_into().expect("8 bytes"));
                let y = f64::from_le_bytes(y.try_into().expect("8 bytes"));
                (x + y).to_le_bytes()
            })
            .collect()
    };
    if let Some(total) = ctx.reduce_to_root(local, &add) {
        let mut sums = [0.0_f64; 3];
        for (sum, chunk) in sums.iter_mut().zip(total.chunks_exact(8)) {
            *sum = f64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        let rms = |s: f64| (s / sums[2].max(1.0)).sqrt();
        println!(
            "{} columns on {size} rank(s), {} days: RMS departure from equilibrium {:.3} K -> {:.3} K",
            settings.columns,
            settings.days,
            rms(sums[0]),
            rms(sums[1])
        );
        let top = levels
            .iter()
            .map(|l| l.pressure_hpa)
            .fold(f64::MAX, f64::min);
        println!(
            "input data: {} ({} levels, top at {top:.1} hPa)",
            profile.display(),
            levels.len()
        );
    }

    // Collective: records of every rank gathered, written once by rank 0 (its notices as
    // today's lines on stderr: the default reporting).
    let reporting = clima_artifact_runtime::progress::Reporting::default();
    if let Some(paths) = report::write_all_collective(ctx, &settings.report, &reporting)? {
        println!("provenance report: {}", paths.markdown.display());
    }
    Ok(())
}

/// The depot: `CLIMA_ARTIFACTS_DEPOT_PATH` if set, else `target/quickstart-depot` (`target/`
/// of this build: the binary lives in `target/<profile>/`), set on every rank alike; rank 0
/// says which.
fn choose_depot(rank: usize) -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os(clima_artifact_runtime::vars::DEPOT_PATH).is_some() {
        return Ok(());
    }
    let target = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let depot = target.join("quickstart-depot");
    if rank == 0 {
        println!(
            "depot: {} (the example's default, inside target/; set {} to use another)",
            depot.display(),
            clima_artifact_runtime::vars::DEPOT_PATH
        );
    }
    let mut config = clima_artifact_runtime::Config::from_env()?;
    config.depots = vec![depot.into()];
    clima_artifact_runtime::set_macro_config(config)
        .map_err(|_| "the artifact configuration was already set")?;
    Ok(())
}

/// Sum of squared departures from equilibrium and the number of values.
fn departure(columns: &[Vec<f64>], levels: &[Level]) -> (f64, usize) {
    let sum = columns
        .iter()
        .flat_map(|c| c.iter().zip(levels))
        .map(|(t, l)| (t - l.equilibrium_k).powi(2))
        .sum();
    (sum, columns.len() * levels.len())
}

/// Reads `pressure_hPa,equilibrium_temperature_K,relaxation_days` rows.
fn read_levels(path: &Path) -> Result<Vec<Level>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let mut levels = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<f64> = line
            .split(',')
            .map(|f| f.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("`{}` line {}: {e}", path.display(), i + 1))?;
        let [pressure_hpa, equilibrium_k, relaxation_days] = fields[..] else {
            return Err(format!(
                "`{}` line {}: expected 3 comma-separated numbers",
                path.display(),
                i + 1
            ));
        };
        levels.push(Level {
            pressure_hpa,
            equilibrium_k,
            relaxation_days,
        });
    }
    if levels.is_empty() {
        return Err(format!("`{}` has no levels", path.display()));
    }
    Ok(levels)
}
