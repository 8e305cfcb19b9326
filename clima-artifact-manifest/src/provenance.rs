//! Syntax checks of provenance metadata values (see [`metadata`](crate::metadata)): SPDX license
//! expressions, DOIs and BibTeX entries. They check form, not truth: a well-formed DOI may still
//! not resolve. [`validate()`](crate::validate()) turns their findings into warnings.

/// Common data and code licenses, with SPDX's spelling; used to catch wrong case.
const KNOWN_LICENSES: &[&str] = &[
    "CC0-1.0",
    "CC-BY-1.0",
    "CC-BY-2.0",
    "CC-BY-2.5",
    "CC-BY-3.0",
    "CC-BY-3.0-IGO",
    "CC-BY-4.0",
    "CC-BY-SA-2.0",
    "CC-BY-SA-2.5",
    "CC-BY-SA-3.0",
    "CC-BY-SA-4.0",
    "CC-BY-NC-2.0",
    "CC-BY-NC-2.5",
    "CC-BY-NC-3.0",
    "CC-BY-NC-4.0",
    "CC-BY-NC-SA-2.0",
    "CC-BY-NC-SA-2.5",
    "CC-BY-NC-SA-3.0",
    "CC-BY-NC-SA-4.0",
    "CC-BY-ND-2.0",
    "CC-BY-ND-2.5",
    "CC-BY-ND-3.0",
    "CC-BY-ND-4.0",
    "CC-BY-NC-ND-2.0",
    "CC-BY-NC-ND-2.5",
    "CC-BY-NC-ND-3.0",
    "CC-BY-NC-ND-4.0",
    "CC-PDDC",
    "ODbL-1.0",
    "ODC-By-1.0",
    "PDDL-1.0",
    "OGL-UK-1.0",
    "OGL-UK-2.0",
    "OGL-UK-3.0",
    "OGL-Canada-2.0",
    "CDLA-Permissive-1.0",
    "CDLA-Permissive-2.0",
    "CDLA-Sharing-1.0",
    "etalab-2.0",
    "DL-DE-BY-2.0",
    "NLOD-2.0",
    "MIT",
    "Apache-2.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "MPL-2.0",
    "Unlicense",
    "GPL-2.0-only",
    "GPL-2.0-or-later",
    "GPL-3.0-only",
    "GPL-3.0-or-later",
    "LGPL-2.1-only",
    "LGPL-2.1-or-later",
    "LGPL-3.0-only",
    "LGPL-3.0-or-later",
    "AGPL-3.0-only",
    "AGPL-3.0-or-later",
];

/// The SPDX spelling of `id` when it is one of the common data and code licenses this crate
/// knows (ignoring case): `cc-by-4.0` gives `CC-BY-4.0`. `None` for other ids, which may still
/// be valid SPDX ids ([`check_license`] accepts any well-formed id).
pub fn known_license(id: &str) -> Option<&'static str> {
    KNOWN_LICENSES
        .iter()
        .find(|k| k.eq_ignore_ascii_case(id))
        .copied()
}

/// Deprecated SPDX ids and what replaces them.
const DEPRECATED: &[(&str, &str)] = &[
    ("GPL-2.0", "GPL-2.0-only"),
    ("GPL-2.0+", "GPL-2.0-or-later"),
    ("GPL-3.0", "GPL-3.0-only"),
    ("GPL-3.0+", "GPL-3.0-or-later"),
    ("LGPL-2.1", "LGPL-2.1-only"),
    ("LGPL-2.1+", "LGPL-2.1-or-later"),
    ("LGPL-3.0", "LGPL-3.0-only"),
    ("LGPL-3.0+", "LGPL-3.0-or-later"),
    ("AGPL-3.0", "AGPL-3.0-only"),
];

const OPERATORS: [&str; 3] = ["AND", "OR", "WITH"];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Open,
    Close,
    Word(&'a str),
}

fn tokenize(expr: &str) -> Result<Vec<Token<'_>>, String> {
    let mut tokens = Vec::new();
    let mut rest = expr;
    while let Some(c) = rest.chars().next() {
        match c {
            c if c.is_whitespace() => rest = &rest[c.len_utf8()..],
            '(' => {
                tokens.push(Token::Open);
                rest = &rest[1..];
            }
            ')' => {
                tokens.push(Token::Close);
                rest = &rest[1..];
            }
            c if is_id_char(c) || c == '+' => {
                let end = rest
                    .find(|c: char| !(is_id_char(c) || c == '+'))
                    .unwrap_or(rest.len());
                tokens.push(Token::Word(&rest[..end]));
                rest = &rest[end..];
            }
            other => {
                return Err(format!(
                    "`{other}` cannot appear in an SPDX expression (ids use letters, digits, `.`, `-`; \
                     combine them with `AND`, `OR`, `WITH` and parentheses)"
                ));
            }
        }
    }
    Ok(tokens)
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == ':'
}

struct SpdxParser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
    notes: Vec<String>,
}

impl<'a> SpdxParser<'a> {
    fn peek(&self) -> Option<&Token<'a>> {
        self.tokens.get(self.pos)
    }

    fn peek_operator(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if *w == op)
    }

    fn expr(&mut self) -> Result<(), String> {
        self.and_expr()?;
        while self.peek_operator("OR") {
            self.pos += 1;
            self.and_expr()?;
        }
        Ok(())
    }

    fn and_expr(&mut self) -> Result<(), String> {
        self.with_expr()?;
        while self.peek_operator("AND") {
            self.pos += 1;
            self.with_expr()?;
        }
        Ok(())
    }

    fn with_expr(&mut self) -> Result<(), String> {
        self.atom()?;
        if self.peek_operator("WITH") {
            self.pos += 1;
            match self.peek() {
                Some(Token::Word(w)) if !OPERATORS.contains(w) => {
                    let w = *w;
                    self.pos += 1;
                    if w.contains('+') || w.contains(':') {
                        return Err(format!("`{w}` is not a license exception id"));
                    }
                }
                _ => return Err(
                    "`WITH` must be followed by an exception id, e.g. `Classpath-exception-2.0`"
                        .to_owned(),
                ),
            }
        }
        Ok(())
    }

    fn atom(&mut self) -> Result<(), String> {
        match self.peek().cloned() {
            Some(Token::Open) => {
                self.pos += 1;
                self.expr()?;
                match self.peek() {
                    Some(Token::Close) => {
                        self.pos += 1;
                        Ok(())
                    }
                    _ => Err("a `(` is not closed".to_owned()),
                }
            }
            Some(Token::Word(w)) if OPERATORS.contains(&w) => {
                Err(format!("expected a license id before `{w}`"))
            }
            Some(Token::Word(w)) => {
                self.pos += 1;
                self.license_id(w)
            }
            Some(Token::Close) => Err("unexpected `)`".to_owned()),
            None => Err("the expression ends where a license id is expected".to_owned()),
        }
    }

    fn license_id(&mut self, word: &str) -> Result<(), String> {
        let (id, plus) = match word.strip_suffix('+') {
            Some(id) => (id, true),
            None => (word, false),
        };
        let valid_ref = |s: &str| {
            s.strip_prefix("LicenseRef-").is_some_and(|r| {
                !r.is_empty()
                    && r.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            })
        };
        let simple = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        };
        if id.contains('+') {
            return Err(format!("`{word}`: `+` may only end a license id"));
        }
        if let Some(doc) = id.strip_prefix("DocumentRef-") {
            let ok = doc
                .split_once(':')
                .is_some_and(|(d, r)| simple(d) && valid_ref(r));
            return if ok && !plus {
                Ok(())
            } else {
                Err(format!(
                    "`{word}` is not of the form `DocumentRef-<doc>:LicenseRef-<name>`"
                ))
            };
        }
        if id.starts_with("LicenseRef-") {
            return if valid_ref(id) && !plus {
                Ok(())
            } else {
                Err(format!(
                    "`{word}` is not of the form `LicenseRef-<letters, digits, . or ->`"
                ))
            };
        }
        if !simple(id) {
            return Err(format!(
                "`{word}` is not a license id (letters, digits, `.` and `-`)"
            ));
        }
        if let Some(op) = OPERATORS.iter().find(|op| op.eq_ignore_ascii_case(id)) {
            return Err(format!("write the operator `{id}` in upper case: `{op}`"));
        }
        if let Some((_, new)) = DEPRECATED.iter().find(|(old, _)| *old == word) {
            self.notes
                .push(format!("`{word}` is a deprecated SPDX id; use `{new}`"));
        } else if let Some(known) = KNOWN_LICENSES
            .iter()
            .find(|k| k.eq_ignore_ascii_case(id) && **k != id)
        {
            self.notes
                .push(format!("`{id}` is spelled `{known}` in the SPDX list"));
        }
        Ok(())
    }
}

/// Problems with an SPDX license expression (ids, `AND`/`OR`/`WITH`, parentheses, a trailing
/// `+`); empty when it is well-formed. Also notes deprecated ids and wrong case of common ids.
/// Unknown but well-formed ids are accepted: the built-in list covers only common licenses.
pub fn check_license(expr: &str) -> Vec<String> {
    if expr.trim().is_empty() {
        return vec!["the license is empty; write an SPDX id such as `CC-BY-4.0`".to_owned()];
    }
    let tokens = match tokenize(expr) {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    let mut parser = SpdxParser {
        tokens,
        pos: 0,
        notes: Vec::new(),
    };
    let mut problems = Vec::new();
    match parser.expr() {
        Ok(()) => match parser.peek() {
            None => {}
            Some(Token::Close) => problems.push("unexpected `)`".to_owned()),
            Some(Token::Word(w)) => {
                if let Some(op) = OPERATORS.iter().find(|op| op.eq_ignore_ascii_case(w)) {
                    problems.push(format!("write the operator `{w}` in upper case: `{op}`"));
                } else {
                    problems.push(format!(
                        "`{w}` follows a license id without an operator; join ids with `AND`, `OR` \
                         or `WITH` (a license name with spaces is not an SPDX id)"
                    ));
                }
            }
            Some(Token::Open) => {
                problems.push("a `(` follows a license id without an operator".to_owned())
            }
        },
        Err(e) => problems.push(e),
    }
    if problems.is_empty() {
        parser.notes
    } else {
        problems
    }
}

/// Prefixes people paste in front of a DOI.
const DOI_PREFIXES: [&str; 5] = [
    "https://doi.org/",
    "http://doi.org/",
    "https://dx.doi.org/",
    "http://dx.doi.org/",
    "doi:",
];

/// Problems with a DOI (`10.NNNN/suffix`); empty when it is well-formed. A resolver prefix
/// (`https://doi.org/`, `doi:`) is accepted with a note to drop it.
pub fn check_doi(doi: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut bare = doi.trim();
    if bare != doi {
        problems.push("the DOI has leading or trailing spaces".to_owned());
    }
    let lower = bare.to_ascii_lowercase();
    if let Some(prefix) = DOI_PREFIXES.iter().find(|p| lower.starts_with(*p)) {
        bare = &bare[prefix.len()..];
        problems.push(format!(
            "write the bare DOI `{bare}` without `{prefix}` (reports add the resolver link)"
        ));
    }
    let well_formed = bare.split_once('/').is_some_and(|(registrant, suffix)| {
        let code = registrant.strip_prefix("10.");
        code.is_some_and(|code| {
            let first = code.split('.').next().unwrap_or("");
            first.len() >= 4
                && code
                    .split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        }) && !suffix.is_empty()
            && !suffix.chars().any(char::is_whitespace)
    });
    if !well_formed {
        problems.retain(|p| !p.starts_with("write the bare DOI"));
        problems.push(format!(
            "`{bare}` is not a DOI; a DOI looks like `10.5194/essd-13-4349-2021` (`10.`, a registrant \
             code of at least 4 digits, `/`, a suffix without spaces)"
        ));
    }
    problems
}

/// Checks that `text` is one or more BibTeX entries
/// `@type{key, field = {...} | "..." | number | name, ...}` with balanced braces (`@string`,
/// `@preamble` and `@comment` are accepted too). Returns the number of entries, or the first
/// problem with its line inside `text`.
pub fn check_bibtex(text: &str) -> Result<usize, String> {
    let mut p = Bib {
        chars: text.chars().collect(),
        pos: 0,
    };
    let mut entries = 0;
    loop {
        p.skip_ws_and_comments();
        let Some(c) = p.peek() else { break };
        if c != '@' {
            return Err(p.error(&format!("expected `@` to start an entry, found `{c}`")));
        }
        p.pos += 1;
        let kind = p.take_while(|c| c.is_ascii_alphabetic());
        if kind.is_empty() {
            return Err(p.error("expected an entry type after `@`, e.g. `@article`"));
        }
        p.skip_ws();
        let close = match p.next() {
            Some('{') => '}',
            Some('(') => ')',
            _ => return Err(p.error(&format!("expected `{{` after `@{kind}`"))),
        };
        match kind.to_ascii_lowercase().as_str() {
            "comment" => {
                p.pos -= 1;
                if close == '}' {
                    p.braced()?;
                } else {
                    p.pos += 1;
                    p.take_while(|c| c != ')');
                    p.expect(')')?;
                }
                continue;
            }
            "preamble" => {
                p.skip_ws();
                p.value()?;
            }
            "string" => {
                p.skip_ws();
                p.field()?;
            }
            _ => {
                p.skip_ws();
                let key = p.take_while(|c| {
                    !c.is_whitespace() && !matches!(c, ',' | '{' | '}' | '(' | ')' | '=' | '"')
                });
                if key.is_empty() {
                    return Err(p.error(&format!(
                        "missing citation key after `@{kind}{{`, e.g. `@{kind}{{smith2021,`"
                    )));
                }
                p.skip_ws();
                if p.peek() != Some(close) {
                    p.expect(',')?;
                }
                loop {
                    p.skip_ws();
                    if p.peek() == Some(close) {
                        break;
                    }
                    p.field()?;
                    p.skip_ws();
                    match p.peek() {
                        Some(',') => p.pos += 1,
                        Some(c) if c == close => break,
                        Some(c) => {
                            return Err(p.error(&format!(
                                "expected `,` or `{close}` after a field value, found `{c}`"
                            )));
                        }
                        None => break,
                    }
                }
            }
        }
        p.skip_ws();
        p.expect(close)?;
        entries += 1;
    }
    if entries == 0 {
        return Err("no BibTeX entry found; expected `@type{key, field = {...}}`".to_owned());
    }
    Ok(entries)
}

struct Bib {
    chars: Vec<char>,
    pos: usize,
}

impl Bib {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.pos += 1;
        c
    }

    fn error(&self, message: &str) -> String {
        let upto = self.pos.min(self.chars.len());
        let line = 1 + self.chars[..upto].iter().filter(|c| **c == '\n').count();
        format!("line {line} of the BibTeX: {message}")
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn skip_ws_and_comments(&mut self) {
        loop {
            self.skip_ws();
            if self.peek() == Some('%') {
                self.take_while(|c| c != '\n');
            } else {
                break;
            }
        }
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.peek() {
            Some(found) if found == c => {
                self.pos += 1;
                Ok(())
            }
            Some(found) => Err(self.error(&format!("expected `{c}`, found `{found}`"))),
            None => Err(self.error(&format!("the text ends where `{c}` is expected"))),
        }
    }

    /// `name = value # value ...`
    fn field(&mut self) -> Result<(), String> {
        let name = self.take_while(|c| c.is_alphanumeric() || "_-:.+/".contains(c));
        if name.is_empty() {
            let found = self
                .peek()
                .map_or("the end".to_owned(), |c| format!("`{c}`"));
            return Err(self.error(&format!("expected a field name, found {found}")));
        }
        self.skip_ws();
        self.expect('=')
            .map_err(|e| format!("{e} (after field `{name}`)"))?;
        self.skip_ws();
        self.value()?;
        loop {
            self.skip_ws();
            if self.peek() == Some('#') {
                self.pos += 1;
                self.skip_ws();
                self.value()?;
            } else {
                return Ok(());
            }
        }
    }

    /// `{...}`, `"..."`, a number, or a macro name.
    fn value(&mut self) -> Result<(), String> {
        match self.peek() {
            Some('{') => self.braced(),
            Some('"') => {
                let start = self.pos;
                self.pos += 1;
                let mut depth = 0usize;
                loop {
                    match self.next() {
                        Some('{') => depth += 1,
                        Some('}') if depth == 0 => {
                            return Err(self.error("unbalanced `}` inside a quoted value"));
                        }
                        Some('}') => depth -= 1,
                        Some('"') if depth == 0 => return Ok(()),
                        Some(_) => {}
                        None => {
                            self.pos = start;
                            return Err(self.error("a quoted value is not closed with `\"`"));
                        }
                    }
                }
            }
            Some(c) if c.is_ascii_digit() => {
                self.take_while(|c| c.is_ascii_digit());
                Ok(())
            }
            Some(c) if c.is_alphabetic() => {
                self.take_while(|c| c.is_alphanumeric() || "_-:.".contains(c));
                Ok(())
            }
            Some(c) => Err(self.error(&format!(
                "expected a value (`{{...}}`, `\"...\"` or a number), found `{c}`"
            ))),
            None => Err(self.error("the text ends where a value is expected")),
        }
    }

    /// A `{...}` group with nested braces.
    fn braced(&mut self) -> Result<(), String> {
        let start = self.pos;
        self.expect('{')?;
        let mut depth = 1usize;
        while depth > 0 {
            match self.next() {
                Some('{') => depth += 1,
                Some('}') => depth -= 1,
                Some(_) => {}
                None => {
                    self.pos = start;
                    return Err(self.error("a `{` is never closed (unbalanced braces)"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn licenses() {
        for ok in [
            "CC-BY-4.0",
            "MIT OR Apache-2.0",
            "(MIT OR Apache-2.0) AND CC0-1.0",
            "GPL-2.0-or-later WITH Classpath-exception-2.0",
            "Apache-2.0+",
            "LicenseRef-ERA5",
            "DocumentRef-spdx-tool-1.2:LicenseRef-MIT-Style-2",
            "((CC-BY-4.0))",
            "NCGD-1.0",
        ] {
            assert_eq!(check_license(ok), Vec::<String>::new(), "{ok}");
        }
        let bad = |e: &str| {
            let p = check_license(e);
            assert!(!p.is_empty(), "{e} accepted");
            p.join("; ")
        };
        assert!(bad("").contains("empty"));
        assert!(bad("CC BY 4.0").contains("without an operator"));
        assert!(bad("MIT and Apache-2.0").contains("upper case: `AND`"));
        assert!(bad("(MIT OR Apache-2.0").contains("not closed"));
        assert!(bad("MIT)").contains("unexpected `)`"));
        assert!(bad("MIT OR").contains("ends where a license id"));
        assert!(bad("AND MIT").contains("before `AND`"));
        assert!(bad("MIT WITH").contains("exception id"));
        assert!(bad("MIT/Apache").contains("`/` cannot appear"));
        assert!(bad("LicenseRef-").contains("LicenseRef-<"));
        assert!(bad("GPL+2").contains("may only end"));
        assert!(bad("cc-by-4.0").contains("spelled `CC-BY-4.0`"));
        assert!(bad("GPL-3.0").contains("use `GPL-3.0-only`"));
    }

    #[test]
    fn dois() {
        assert!(check_doi("10.5194/essd-13-4349-2021").is_empty());
        assert!(check_doi("10.1000.10/123(4)").is_empty());
        let p = check_doi("https://doi.org/10.5194/essd-13-4349-2021");
        assert_eq!(p.len(), 1);
        assert!(
            p[0].contains("bare DOI `10.5194/essd-13-4349-2021`"),
            "{p:?}"
        );
        assert!(check_doi("doi:10.1234/x")[0].contains("without `doi:`"));
        for bad in [
            "10.12/x",
            "11.1234/x",
            "10.1234/",
            "10.1234",
            "10.1234/a b",
            "",
            "https://doi.org/",
        ] {
            let p = check_doi(bad);
            assert!(p.iter().any(|m| m.contains("is not a DOI")), "{bad}: {p:?}");
        }
        assert!(check_doi(" 10.1234/x")[0].contains("spaces"));
    }

    #[test]
    fn bibtex() {
        let ok = r#"
% a comment
@article{hersbach2020,
  author = {Hersbach, H. and {Bell}, B.},
  title = "The {ERA5} global reanalysis",
  year = 2020,
  month = jan,
  note = "a" # {b},
}
@misc( dataset , howpublished = {\url{https://x}} )
@string{ecmwf = "ECMWF"}
@comment{ anything { nested } }
@book{nofields}
"#;
        assert_eq!(check_bibtex(ok), Ok(4));
        let err = |t: &str| check_bibtex(t).unwrap_err();
        assert!(err("").contains("no BibTeX entry"));
        assert!(err("article{x, a = 1}").contains("expected `@`"));
        assert!(err("@{x, a = 1}").contains("entry type"));
        assert!(err("@article{, a = 1}").contains("missing citation key"));
        assert!(err("@article{x, title = {unbalanced}").contains("line 1"));
        assert!(
            err("@article{x,\n title = {a {b}\n")
                .contains("line 2 of the BibTeX: a `{` is never closed")
        );
        assert!(err("@article{x,\n title = {a {b}\n}").contains("ends where `}` is expected"));
        assert!(err("@article{x, title {a}}").contains("expected `=`"));
        assert!(err("@article{x, title = \"abc}").contains("unbalanced `}`"));
        assert!(err("@article{x, title = \"abc}").contains("line 1"));
        assert!(err("@article{x, a = 1 b = 2}").contains("expected `,` or `}`"));
        assert!(err("@article{x, a = ,}").contains("expected a value"));
        assert!(err("@article{x, a = 1}\n@misc{y, t = \"open").contains("line 2"));
    }
}
