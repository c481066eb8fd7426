//! Reading one sample from a server's Prometheus `/metrics`, shared by the end-to-end tests.

/// The value of the sample whose series (name plus labels, exactly as exposed) is `series`,
/// scraped from `{base}/metrics`. Panics, showing the whole exposition, when it is absent.
pub async fn scrape(base: &str, series: &str) -> f64 {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("{series} ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {series} in {text}"));
    line[prefix.len()..].parse().unwrap()
}
