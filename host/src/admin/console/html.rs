//! HTML building for the console: escaping, the page frame, and small
//! helpers, with `format!` and nothing else (no template engine, no
//! front-end build). Every value that comes from the broker goes through
//! [`escape`].

use std::fmt::Write as _;

/// `text` safe in element content and in double-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The sections of the navigation bar: path and title.
const SECTIONS: [(&str, &str); 4] = [
    ("/", "Overview"),
    ("/console/topics", "Topics"),
    ("/console/groups", "Groups"),
    ("/console/plugins", "Plugins"),
];

/// A whole page: head, navigation (with `active` marked), `body`.
pub fn page(title: &str, active: &str, body: &str) -> String {
    let mut nav = String::new();
    for (path, name) in SECTIONS {
        let class = if path == active {
            " class=\"active\""
        } else {
            ""
        };
        let _ = write!(nav, "<a href=\"{path}\"{class}>{name}</a>");
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Gregor</title><link rel=\"icon\" href=\"data:,\">\
         <link rel=\"stylesheet\" href=\"/console/console.css\"></head>\
         <body><header><span class=\"brand\">Gregor</span><nav>{nav}</nav></header>\
         <main><h1>{title}</h1>{body}</main>\
         <script src=\"/console/console.js\"></script></body></html>\n",
        title = escape(title),
    )
}

/// A table: header cells, then rows of already-escaped cells.
pub fn table(id: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("<table id=\"{}\"><thead><tr>", escape(id));
    for header in headers {
        let _ = write!(out, "<th>{}</th>", escape(header));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(
            out,
            "<tr><td colspan=\"{}\" class=\"empty\">none</td></tr>",
            headers.len()
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// Bytes in B, KiB, MiB or GiB.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A number, or a dash for what this node does not know.
pub fn maybe<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "–".to_string(), |v| v.to_string())
}

/// Broker ids joined with commas.
pub fn ids(ids: &[i32]) -> String {
    ids.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
    }

    #[test]
    fn empty_tables_say_so() {
        let html = table("t", &["A", "B"], &[]);
        assert!(html.contains("colspan=\"2\""), "{html}");
    }
}
