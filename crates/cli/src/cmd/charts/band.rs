//! A series repeated over rounds, summed up per second: the median of the rounds' values and
//! their spread (min–max). On this shared machine two identical runs differ by more than the
//! effects measured; one line per round hides that under a tangle, a median with its band shows it.

/// One second of a series over its rounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandPoint {
    /// Where it is drawn: the middle of its second.
    pub x: f64,
    pub low: f64,
    pub median: f64,
    pub high: f64,
    /// How many rounds have a value at this second.
    pub rounds: usize,
}

/// Each second's median and min–max over `rounds` (one value a second each). Rounds may differ
/// in length — a run that stopped early — so a second is summed over the rounds that reached
/// it; values that are not finite are left out.
pub fn median_band(rounds: &[Vec<f64>]) -> Vec<BandPoint> {
    let seconds = rounds.iter().map(Vec::len).max().unwrap_or(0);
    (0..seconds)
        .filter_map(|i| {
            let mut values: Vec<f64> =
                rounds.iter().filter_map(|r| r.get(i).copied()).filter(|v| v.is_finite()).collect();
            values.sort_by(f64::total_cmp);
            let (low, high) = (*values.first()?, *values.last()?);
            Some(BandPoint { x: i as f64 + 0.5, low, median: median(&values), high, rounds: values.len() })
        })
        .collect()
}

/// The median of sorted, non-empty `values`: the mean of the two middle ones for an even count.
fn median(values: &[f64]) -> f64 {
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_second_gets_the_median_and_the_extremes_of_its_rounds() {
        let band = median_band(&[vec![10.0, 50.0], vec![30.0, 20.0], vec![20.0, 40.0]]);
        assert_eq!(
            band,
            vec![
                BandPoint { x: 0.5, low: 10.0, median: 20.0, high: 30.0, rounds: 3 },
                BandPoint { x: 1.5, low: 20.0, median: 40.0, high: 50.0, rounds: 3 },
            ]
        );
    }

    #[test]
    fn rounds_of_unequal_length_count_where_they_reach() {
        let band = median_band(&[vec![1.0, 2.0, 3.0, 7.0], vec![5.0, 6.0], vec![9.0, 10.0, 11.0]]);
        assert_eq!(band.len(), 4, "as long as the longest round");
        assert_eq!((band[1].median, band[1].rounds), (6.0, 3));
        // Two rounds reach second 2: the median is the mean of the two.
        assert_eq!((band[2].low, band[2].median, band[2].high, band[2].rounds), (3.0, 7.0, 11.0, 2));
        assert_eq!((band[3].low, band[3].median, band[3].high, band[3].rounds), (7.0, 7.0, 7.0, 1));
    }

    #[test]
    fn one_round_is_a_band_of_no_width() {
        let band = median_band(&[vec![4.0, 8.0]]);
        assert!(band.iter().all(|p| p.low == p.median && p.median == p.high && p.rounds == 1));
    }

    #[test]
    fn values_that_are_not_numbers_are_left_out() {
        let band = median_band(&[vec![f64::NAN, 3.0], vec![2.0, f64::INFINITY], vec![4.0, 5.0]]);
        assert_eq!((band[0].median, band[0].rounds), (3.0, 2));
        assert_eq!((band[1].median, band[1].rounds), (4.0, 2));
    }

    #[test]
    fn a_second_no_round_has_a_number_for_is_skipped_and_no_rounds_is_no_points() {
        assert_eq!(median_band(&[vec![f64::NAN, 1.0]]).len(), 1);
        assert!(median_band(&[]).is_empty());
        assert!(median_band(&[vec![], vec![]]).is_empty());
    }
}
