//! Figures over rounds (min / median / max) and how they are printed: a text table for people,
//! JSON for scripts.

use serde::Serialize;

/// One measured figure, one value per round.
#[derive(Debug, Serialize)]
pub struct Figure {
    /// The store it was measured on.
    pub store: super::procs::StoreKind,
    /// The mode (`generate`, `tasks`, `idle`, `redis-memory`).
    pub mode: &'static str,
    /// What was measured, e.g. `c=16 throughput`.
    pub name: String,
    /// Its unit, e.g. `runs/s`.
    pub unit: &'static str,
    /// With `--against`: the build it was measured on (`agentd`, `against`), or
    /// `against / agentd` for their ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<&'static str>,
    /// Smallest over rounds.
    pub min: f64,
    /// Median over rounds.
    pub median: f64,
    /// Largest over rounds.
    pub max: f64,
    /// Every round's value, in order.
    pub rounds: Vec<f64>,
}

impl Figure {
    /// A figure from its per-round values (at least one).
    pub fn new(
        store: super::procs::StoreKind,
        mode: &'static str,
        name: impl Into<String>,
        unit: &'static str,
        rounds: Vec<f64>,
    ) -> Self {
        let mut sorted = rounds.clone();
        sorted.sort_by(f64::total_cmp);
        let pick = |i: usize| sorted.get(i).copied().unwrap_or(f64::NAN);
        Self {
            store,
            mode,
            name: name.into(),
            unit,
            build: None,
            min: pick(0),
            median: pick(sorted.len() / 2),
            max: pick(sorted.len().saturating_sub(1)),
            rounds,
        }
    }

    /// The figure, marked as measured on `build` (see [`Figure::build`]).
    pub fn of_build(self, build: &'static str) -> Self {
        Self {
            build: Some(build),
            ..self
        }
    }

    /// The figure as one line of the text table.
    pub fn line(&self) -> String {
        let name = match self.build {
            Some(build) => format!("{} [{build}]", self.name),
            None => self.name.clone(),
        };
        format!(
            "{:<19} {:<13} {:<48} {:>10} {:<8} (min {}, max {})",
            self.store.name(),
            self.mode,
            name,
            number(self.median),
            self.unit,
            number(self.min),
            number(self.max),
        )
    }
}

/// A value with as many decimals as its size deserves.
fn number(value: f64) -> String {
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        _ => format!("{value:.2}"),
    }
}

/// The median of values (NaN when empty).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The `q` quantile of values.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let last = values.len().saturating_sub(1);
    values
        .get(((last as f64) * q).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procs::StoreKind;

    #[test]
    fn a_figure_summarizes_its_rounds() {
        let figure = Figure::new(
            StoreKind::Embedded,
            "generate",
            "x",
            "ms",
            vec![3.0, 1.0, 2.0],
        );
        assert_eq!((figure.min, figure.median, figure.max), (1.0, 2.0, 3.0));
        assert_eq!(figure.rounds, [3.0, 1.0, 2.0]);
        assert!(figure.line().contains("2.00"), "{}", figure.line());
        assert_eq!(figure.build, None);
        let line = figure.of_build("against").line();
        assert!(line.contains("x [against]"), "{line}");
    }

    #[test]
    fn quantiles_pick_the_nearest_rank() {
        let mut values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&mut values, 0.5), 51.0);
        assert_eq!(quantile(&mut values, 0.99), 99.0);
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), 3.0);
    }
}
