//! `json_strings` the other way: an object or array given for a string field meant to
//! hold JSON text (a file's content, a request body) becomes that text, compact, its keys
//! in the model's order.
//!
//! Only for a field whose name or description says it holds text or a document: a
//! `city` given `{"name": "Paris"}` is a misplaced structure, not JSON text, and stays a
//! `wrong_type` issue.

use serde_json::Value;

use super::super::compile::Flat;
use crate::FixKind;

/// Words of a field's name that mark it as holding text or a document.
const TEXT_NAMES: &[&str] = &[
    "content", "contents", "body", "text", "json", "payload", "data", "source", "code", "file",
    "document", "doc", "config", "template", "script", "snippet", "raw", "value", "markdown",
    "yaml", "manifest", "spec", "input", "output", "lines",
];
/// Words of a description that do so. Not "file": "Path of the file to read" describes
/// a name, and a list of names given to it is one call per name, never JSON text.
const TEXT_DESCRIPTIONS: &[&str] = &["json", "content", "contents", "body", "payload", "document"];

/// Does the field `key` (its description `description`) say it holds text or a document
/// (a file's content, a body, code), by a word of its name or of its description?
pub(crate) fn holds_document(key: &str, description: Option<&str>) -> bool {
    words(key).any(|w| TEXT_NAMES.contains(&w.as_str()))
        || description.is_some_and(|d| words(d).any(|w| TEXT_DESCRIPTIONS.contains(&w.as_str())))
}

/// The JSON text of `value` when the string field `key` (schema `flat`) is meant to hold it.
pub(super) fn encoded(value: &Value, key: &str, flat: &Flat<'_>) -> Option<(FixKind, Value)> {
    if !matches!(value, Value::Object(_) | Value::Array(_))
        || flat.enum_values().is_some()
        || flat.const_value().is_some()
        || flat.format().is_some()
    {
        return None;
    }
    let json_media = flat
        .content_media_type()
        .is_some_and(|t| t.ends_with("json"));
    // A list of strings reads two more ways than as JSON text: names, one call per name
    // (a merged call), or the text in pieces with no word of how they join (feedback).
    // Only a declared JSON media type takes it as JSON text.
    let strings = value
        .as_array()
        .is_some_and(|items| !items.is_empty() && items.iter().all(Value::is_string));
    if strings && !json_media {
        return None;
    }
    (json_media || holds_document(key, flat.description()))
        .then(|| (FixKind::JsonTextEncoded, Value::String(value.to_string())))
}

/// Does a member of `map` name a file (a key with `path` or `file` among its words, a
/// one-line string value) whose extension says its format is not JSON (`notes.md`,
/// `app.py`, `ci.yaml`)? Then a structure given for its content is no JSON text: the
/// model meant that format's text, which is not for toolmend to write. A JSON family
/// extension (`.json`, `.jsonc`, `.geojson`, `.ipynb`), a dotfile without one
/// (`.prettierrc`) or no extension says nothing.
pub(super) fn names_non_json_file(map: &serde_json::Map<String, Value>) -> bool {
    map.iter().any(|(k, v)| {
        let Some(s) = v.as_str() else {
            return false;
        };
        if s.len() > 1024 || s.contains(char::is_whitespace) {
            return false;
        }
        if !words(k).any(|w| matches!(w.as_str(), "path" | "file" | "filename" | "filepath")) {
            return false;
        }
        let name = s.rsplit(['/', '\\']).next().unwrap_or_default();
        let Some(dot) = name.rfind('.').filter(|&d| d > 0) else {
            return false;
        };
        let ext = name[dot + 1..].to_ascii_lowercase();
        !ext.is_empty()
            && ext.len() <= 16
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && !ext.contains("json")
            && ext != "ipynb"
    })
}

/// The lowercase words of a name (`new_source`, `fileText`, `request-body`) or a sentence.
fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in s.chars().take(512) {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = c.is_ascii_lowercase();
            word.push(c.to_ascii_lowercase());
        } else {
            prev_lower = false;
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.into_iter()
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn names_split_into_words() {
        let w: Vec<String> = words("fileText new_source request-Body").collect();
        assert_eq!(w, ["file", "text", "new", "source", "request", "body"]);
    }
}
