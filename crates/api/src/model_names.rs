//! The names clients may put in `model`, and the served id each one means: a model's own id,
//! its extra names (`--served-model-name qwen,gpt-4o`), alias rules with globs
//! (`--model-alias 'claude-*=qwen3-coder'`, for clients whose model names are fixed), and the
//! model a request without `model` goes to (`--default-model`, else the only model served).

/// Where a requested name leads.
#[derive(Debug, Clone, Default)]
pub struct ModelNames {
    /// Extra names, each for one served id.
    names: Vec<(String, String)>,
    /// Alias rules in the order given: the first whose pattern matches wins.
    aliases: Vec<(String, String)>,
    /// `--default-model`.
    default: Option<String>,
}

impl ModelNames {
    /// `name` also means `id`.
    pub fn with_name(mut self, name: &str, id: &str) -> Self {
        self.names.push((name.to_string(), id.to_string()));
        self
    }

    /// Adds an alias rule `PATTERN=ID` (`*` matches any run of characters, `?` one); an error
    /// says what is wrong with a malformed rule.
    pub fn with_alias(mut self, rule: &str) -> Result<Self, String> {
        let Some((pattern, target)) = rule.split_once('=') else {
            return Err(format!(
                "--model-alias {rule:?}: expected PATTERN=MODEL, e.g. 'claude-*=qwen3-coder'"
            ));
        };
        let (pattern, target) = (pattern.trim(), target.trim());
        if pattern.is_empty() || target.is_empty() {
            return Err(format!(
                "--model-alias {rule:?}: both the pattern and the model must be given"
            ));
        }
        self.aliases.push((pattern.to_string(), target.to_string()));
        Ok(self)
    }

    /// Requests without `model` go to `id`.
    pub fn with_default(mut self, id: &str) -> Self {
        self.default = Some(id.to_string());
        self
    }

    /// Every name that must lead to a served model (extra names' and aliases' targets, the
    /// default), for checking at start-up against what is served.
    pub fn targets(&self) -> impl Iterator<Item = &str> {
        let names = self.names.iter().map(|(_, id)| id.as_str());
        let aliases = self.aliases.iter().map(|(_, id)| id.as_str());
        names.chain(aliases).chain(self.default.as_deref())
    }

    /// The served id `requested` names among `ids`: an id itself, then an extra name, then the
    /// first alias rule that matches (its target may itself be an extra name).
    pub fn resolve(&self, requested: &str, ids: &[String]) -> Option<String> {
        let direct = |name: &str| -> Option<String> {
            if ids.iter().any(|id| id == name) {
                return Some(name.to_string());
            }
            let (_, id) = self.names.iter().find(|(n, _)| n == name)?;
            ids.contains(id).then(|| id.clone())
        };
        direct(requested).or_else(|| {
            let (_, target) = self
                .aliases
                .iter()
                .find(|(pattern, _)| glob_matches(pattern, requested))?;
            direct(target)
        })
    }

    /// The id a request without `model` goes to: `--default-model`, else the only model.
    pub fn default_id(&self, ids: &[String]) -> Option<String> {
        match &self.default {
            Some(name) => self.resolve(name, ids),
            None if ids.len() == 1 => ids.first().cloned(),
            None => None,
        }
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters (none included)
/// and `?` exactly one. Linear in the lengths' product at worst: one pass with backtracking to
/// the last `*` only.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut i, mut j) = (0, 0);
    // Where the last `*` was, and the text position it is currently matched up to.
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            // Let the last `*` take one more character and retry from there.
            star = Some((si, sj + 1));
            i = si + 1;
            j = sj + 1;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn globs_match_runs_and_single_characters() {
        for (pattern, text, want) in [
            ("claude-*", "claude-sonnet-4-5", true),
            ("claude-*", "claude-", true),
            ("claude-*", "claud", false),
            ("*", "", true),
            ("gpt-?o", "gpt-4o", true),
            ("gpt-?o", "gpt-40o", false),
            ("*-mini", "o4-mini", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(glob_matches(pattern, text), want, "{pattern} ~ {text}");
        }
    }

    #[test]
    fn names_resolve_ids_then_extra_names_then_the_first_matching_alias() {
        let served = ids(&["qwen3-coder", "gemma"]);
        let names = ModelNames::default()
            .with_name("coder", "qwen3-coder")
            .with_alias("claude-*=coder")
            .unwrap()
            .with_alias("*=gemma")
            .unwrap();
        let resolve = |name: &str| names.resolve(name, &served);
        assert_eq!(resolve("gemma").as_deref(), Some("gemma"));
        assert_eq!(resolve("coder").as_deref(), Some("qwen3-coder"));
        assert_eq!(resolve("claude-opus-4").as_deref(), Some("qwen3-coder"));
        assert_eq!(resolve("gpt-4o").as_deref(), Some("gemma"));
        let strict = ModelNames::default().with_name("coder", "qwen3-coder");
        assert_eq!(strict.resolve("claude-opus-4", &served), None);
        // A name whose model is not served leads nowhere.
        assert_eq!(strict.resolve("coder", &ids(&["gemma"])), None);
    }

    #[test]
    fn a_request_without_a_model_goes_to_the_default_or_the_only_model() {
        let names = ModelNames::default();
        assert_eq!(names.default_id(&ids(&["a"])).as_deref(), Some("a"));
        assert_eq!(names.default_id(&ids(&["a", "b"])), None);
        let names = names.with_name("fast", "b").with_default("fast");
        assert_eq!(names.default_id(&ids(&["a", "b"])).as_deref(), Some("b"));
    }

    #[test]
    fn malformed_alias_rules_are_refused_with_the_form_expected() {
        for rule in ["claude-*", "=qwen", "claude-*="] {
            let err = ModelNames::default().with_alias(rule).unwrap_err();
            assert!(err.contains("--model-alias"), "{err}");
        }
    }
}
