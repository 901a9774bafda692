//! Fixes: every change toolmend makes to a call is recorded as a [`Fix`].
//!
//! A fix carries a stable snake_case id ([`FixKind`]), a [`Safety`] level
//! (ruff's `Applicability` idea) and where it happened: a byte offset into the
//! raw text for syntax repairs, a JSON Pointer for schema coercions.

use serde::{Deserialize, Serialize};

/// How much a fix can be trusted to preserve what the model meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Safety {
    /// The meaning is certainly preserved (a trailing comma, a code fence).
    Safe,
    /// Very likely preserved, but a reading was chosen (a `"5"` -> `5` coercion, a key rename).
    Unsafe,
    /// Information was lost: the model never finished the call (truncation).
    Lossy,
}

macro_rules! fix_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $safety:ident; )*) => {
        /// The stable id of a fix. Serialised as its snake_case id.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum FixKind {
            $( $(#[$doc])* $variant, )*
        }

        impl FixKind {
            /// Every kind, in declaration order (for reports and docs).
            pub const ALL: &'static [FixKind] = &[$(FixKind::$variant,)*];

            /// The stable snake_case id, as serialised.
            pub fn id(self) -> &'static str {
                match self { $( FixKind::$variant => $id, )* }
            }

            /// How far the fix can be trusted.
            pub fn safety(self) -> Safety {
                match self { $( FixKind::$variant => Safety::$safety, )* }
            }
        }
    };
}

fix_kinds! {
    // ---- envelope: text around or over the JSON ----
    /// A `<think>…</think>` (or similar) reasoning block was removed.
    ThinkingStripped = "thinking_stripped", Safe;
    /// A markdown code fence around the JSON was removed.
    FenceStripped = "fence_stripped", Safe;
    /// Natural-language text before or after the JSON was removed.
    ProseStripped = "prose_stripped", Safe;
    /// Chat-template special tokens (`<|im_end|>`, `<|eom_id|>` …) were removed.
    SpecialTokensStripped = "special_tokens_stripped", Safe;
    /// A Hermes/Qwen `<tool_call>` tag was unwrapped.
    ToolCallTagUnwrapped = "tool_call_tag_unwrapped", Safe;
    /// A Llama `<|python_tag|>` call was unwrapped.
    PythonTagUnwrapped = "python_tag_unwrapped", Safe;
    /// A Mistral `[TOOL_CALLS]` list was unwrapped.
    MistralToolCallsUnwrapped = "mistral_tool_calls_unwrapped", Safe;
    /// Qwen3-Coder `<function=…><parameter=…>` XML was read as arguments.
    XmlParametersRead = "xml_parameters_read", Safe;
    /// A closing tag (`</parameter>`, `</function>`) was missing before the next tag.
    MissingCloseTag = "missing_close_tag", Safe;
    /// A value whose closing tag never came ended in a drifted one (Qwen3-Coder's
    /// `</parameter1>`, `</parameter_function>`, a bare `</parameter`): read as its end,
    /// as the model servers read it; the detail names it. A reading was chosen (the text
    /// could have been the value's), so the fix is not safe.
    DriftedCloseTag = "drifted_close_tag", Unsafe;
    /// A Gemma 4 call written without its `<|tool_call>` token (degraded into `<call>`,
    /// or a bare `call:f{…}` on a line after prose), read because its body uses Gemma's
    /// string delimiter `<|"|>`, a token emitted only in calls; the detail says which. The
    /// token that marks a call was not written, so the fix is not safe.
    MissingCallOpener = "missing_call_opener", Unsafe;
    /// A pythonic call `f(a=1)` was read as arguments.
    PythonicCallRead = "pythonic_call_read", Safe;
    /// The arguments were a JSON string holding the JSON object.
    DoubleEncodedDecoded = "double_encoded_decoded", Safe;
    /// Every quote was escaped (`{\"a\": 1}`) without an enclosing string.
    OverescapedQuotesUnescaped = "overescaped_quotes_unescaped", Safe;
    /// A whole call object (`{"name", "arguments"}`) stood where its arguments belong.
    CallWrapperUnwrapped = "call_wrapper_unwrapped", Safe;
    /// The same arguments object was emitted twice in a row; one copy kept.
    DuplicateCallDropped = "duplicate_call_dropped", Unsafe;
    /// A call that named no tool (Kimi K2's bare counter id, `<|tool_call_begin|>0`) was
    /// given the only tool of the request that can take its arguments (the one tool, or
    /// the one whose schema lists every key given); the detail names it.
    ToolNameInferred = "tool_name_inferred", Unsafe;
    /// A tool name matched a tool up to case and separators (`GetWeather` -> `get_weather`).
    ToolNameFixed = "tool_name_fixed", Unsafe;
    /// Two different calls were glued together; they were split.
    ConcatenatedCallsSplit = "concatenated_calls_split", Unsafe;
    /// The text held several JSON candidates for one call (a draft, then the answer): the
    /// last, which fits the schema better than reading every candidate as a call, was kept;
    /// the earlier drafts were dropped (the detail says how many).
    JsonCandidateChosen = "json_candidate_chosen", Unsafe;
    /// The arguments were followed by prose holding JSON snippets (`… then I will run
    /// {"command": ["pytest"]}.`): the snippets were read as part of the prose, not as more
    /// calls, and dropped with it (the detail says how many).
    JsonInProseDropped = "json_in_prose_dropped", Unsafe;
    /// Empty argument text (some servers send `""` for a call without arguments) read as `{}`.
    EmptyArgumentsAsObject = "empty_arguments_as_object", Safe;
    /// A corrector rewrote the arguments (the detail holds both versions).
    ArgumentsCorrected = "arguments_corrected", Unsafe;
    /// The unresolved-call hook supplied the arguments (the detail holds both versions).
    ArgumentsSalvaged = "arguments_salvaged", Unsafe;
    /// A function name outside OpenAI's `^[a-zA-Z0-9_-]{1,64}$` was made to fit (the next
    /// request would be refused otherwise).
    FunctionNameSanitized = "function_name_sanitized", Safe;
    /// An empty tool result was given a placeholder text (Anthropic and Bedrock refuse empty results).
    EmptyResultFilled = "empty_result_filled", Safe;
    /// Calls written into the assistant's text were moved into `tool_calls`; the text keeps
    /// the prose before them.
    CallsMovedFromText = "calls_moved_from_text", Safe;
    /// A call without a usable id got one (`call_tm_{message}_{call}`): a result can only
    /// join a call by its id.
    CallIdMinted = "call_id_minted", Safe;
    /// A call's id was replaced (it repeated another call's, an earlier turn used it, or it
    /// was longer than 40 characters); the detail holds both.
    CallIdRenamed = "call_id_renamed", Safe;

    // ---- syntax: broken JSON text ----
    /// Strings or keys in single quotes.
    SingleQuotes = "single_quotes", Safe;
    /// Typographic quotes (“ ” ‘ ’) used as JSON quotes.
    SmartQuotes = "smart_quotes", Safe;
    /// Python `True`/`False`/`None` (or JS `undefined`) read as JSON literals.
    PythonLiteral = "python_literal", Safe;
    /// A comma before `}` or `]` removed.
    TrailingComma = "trailing_comma", Safe;
    /// A missing comma between members or elements inserted.
    MissingComma = "missing_comma", Safe;
    /// A `//`, `#` or `/* */` comment removed.
    CommentRemoved = "comment_removed", Safe;
    /// An object key without quotes.
    UnquotedKey = "unquoted_key", Safe;
    /// A string value without quotes (a bare word) read as a string.
    UnquotedString = "unquoted_string", Unsafe;
    /// A raw control character (newline, tab) inside a string escaped.
    ControlCharEscaped = "control_char_escaped", Safe;
    /// A double quote inside a string that was not escaped.
    InnerQuoteEscaped = "inner_quote_escaped", Unsafe;
    /// A backslash that starts no valid escape, kept as a literal backslash.
    InvalidEscapeKept = "invalid_escape_kept", Safe;
    /// In a string whose text shows its backslashes were not escaped (an invalid escape
    /// such as `\s` or `\U`, or a raw line break, in the same string), the valid-looking
    /// escapes (`\b`, `\n`, `\t`, `\f`, `\r`) were kept as written too: `"\bclass\s+"`
    /// is a regex, `D:\new_app` a path.
    EscapesKeptLiteral = "escapes_kept_literal", Unsafe;
    /// `NaN` / `Infinity` replaced by `null` (as `JSON.stringify` does).
    NonFiniteNumber = "non_finite_number", Unsafe;
    /// A key given twice with the same value; one copy kept.
    DuplicateKey = "duplicate_key", Safe;
    /// A key given twice with different values: the last wins (a later text supersedes
    /// an earlier one), but a reading was chosen, so it is not safe; the detail names the
    /// value dropped.
    DuplicateKeyConflict = "duplicate_key_conflict", Unsafe;
    /// Members without the enclosing `{ }`.
    OuterBracesAdded = "outer_braces_added", Safe;
    /// Closing brackets with nothing to close removed.
    ExtraClosingRemoved = "extra_closing_removed", Safe;
    /// A number in a non-JSON form (`31800.`, `.5`, `+1`, `0x1F`, `1_000`) normalised.
    NumberNormalized = "number_normalized", Safe;
    /// A missing `:` between a key and its value inserted.
    MissingColon = "missing_colon", Unsafe;
    /// A key with no value (`{"a": , …}`) dropped: no value is invented.
    MissingValueDropped = "missing_value_dropped", Unsafe;
    /// A closing bracket of the wrong kind (`]` closing an object) read as the right one.
    MismatchedBracket = "mismatched_bracket", Safe;
    /// Text that is not JSON between members skipped.
    GarbageSkipped = "garbage_skipped", Unsafe;
    /// A Python triple-quoted string (`"""…"""`, `'''…'''`) read as Python does: its content
    /// verbatim, inner quotes and line breaks included.
    TripleQuotedString = "triple_quoted_string", Safe;
    /// A triple-quoted string whose end is a guess: it closed in a run of five or more
    /// quotes (`"""a"""""`: the quotes before the closer may be content, or Python's
    /// implicit concatenation of `"""a"""` and `""`), or what follows its closer cannot
    /// follow a value (`"""print("""hi""")"""`: a triple quote inside it). The value read
    /// may not be the one the model wrote.
    TripleQuotedAmbiguous = "triple_quoted_ambiguous", Lossy;
    /// A string that kept an odd number of unescaped double quotes inside it, closed by
    /// the next one: that quote may be the last of its own (`"echo "done"`) with the
    /// closing quote missing, or close it (`echo "done`). It cannot be told which.
    InnerQuotesAmbiguous = "inner_quotes_ambiguous", Lossy;
    /// A value without quotes ran past commas or line breaks; it was read as one string up
    /// to the next key or closing bracket (no continuation could be a member).
    UnquotedTextJoined = "unquoted_text_joined", Unsafe;
    /// A value without quotes whose end is a guess: it ran past a comma or line break
    /// followed by what could also be a member without its colon (`, days 3`), kept as text
    /// (that member, if one was meant, is lost); or it stopped at a `}` or `]` that may be
    /// text (`a } b, "n": 1}`), or at a key inside a bracket it opened (`a {"b": 1}`); or it
    /// is wrapped in backticks (`` `ls -la` ``: delimiters or text?).
    UnquotedTextAmbiguous = "unquoted_text_ambiguous", Lossy;
    /// The text ended right after a complete member with only `}` left to close; the
    /// braces were added (nothing was cut: no open string, array, key or `,`).
    ClosingBracesAdded = "closing_braces_added", Safe;
    /// The text stopped before closing brackets, inside an array or after a `,`, `:` or
    /// `{` (more was coming); they were closed.
    UnclosedBrackets = "unclosed_brackets", Lossy;
    /// The text stopped inside a string; the prefix was kept and closed.
    TruncatedString = "truncated_string", Lossy;
    /// The text stopped inside a literal (`tr`); it was completed.
    TruncatedLiteral = "truncated_literal", Lossy;
    /// The text stopped inside a key or right after a colon; that member was dropped.
    TruncatedMemberDropped = "truncated_member_dropped", Lossy;
    /// The model stopped at its token limit (`finish_reason: "length"`) during or right
    /// after this call, the last of its answer: the call may be incomplete even where its
    /// text closes.
    CutOffAtTokenLimit = "cut_off_at_token_limit", Lossy;

    // ---- schema: parses, but does not fit the tool's JSON Schema ----
    /// A string holding a number became that number.
    StringToNumber = "string_to_number", Unsafe;
    /// A string holding an integer became that integer.
    StringToInteger = "string_to_integer", Unsafe;
    /// A string holding a boolean (`"true"`, `"False"`, `"yes"`) became that boolean.
    StringToBoolean = "string_to_boolean", Unsafe;
    /// A number or boolean given for a string became its text.
    ScalarToString = "scalar_to_string", Safe;
    /// A float with no fractional part given for an integer became an integer.
    FloatToInteger = "float_to_integer", Safe;
    /// A single value given for an array became a one-element array.
    WrappedInArray = "wrapped_in_array", Safe;
    /// A comma-separated string given for an array of strings was split.
    CsvSplit = "csv_split", Unsafe;
    /// An enum value matched case- or separator-insensitively.
    EnumCaseFixed = "enum_case_fixed", Safe;
    /// An unknown key mapped to the schema's key by an alias: a synonym, an abbreviation, an
    /// acronym, another word order, a qualifier left out.
    KeyRenamed = "key_renamed", Unsafe;
    /// The correction model changed a value no issue named (or added one), and
    /// `correction scope = "unsafe"` kept it: what runs is not what the model sent there.
    CorrectionBeyondIssues = "correction_beyond_issues", Unsafe;
    /// A key the schema does not allow (`additionalProperties: false`) was dropped: its
    /// value is lost (no property of the schema could be its home).
    UnknownKeyDropped = "unknown_key_dropped", Lossy;
    /// A key in another case or separator style (`departDate` -> `depart_date`).
    KeyCaseFixed = "key_case_fixed", Safe;
    /// A misspelt key, at most two edits from the schema's (`adress` -> `address`).
    KeySpellingFixed = "key_spelling_fixed", Safe;
    /// A key naming the head word of the schema's key (`notes` -> `delivery_notes`).
    KeyRenamedByTokens = "key_renamed_by_tokens", Unsafe;
    /// A key whose words are in a property's description (`arrival_city` -> `dest`, "City
    /// of arrival").
    KeyRenamedByDescription = "key_renamed_by_description", Unsafe;
    /// The one unknown key given the one missing required key, its value fitting that
    /// key's type: the schema leaves no other reading.
    KeyRenamedByStructure = "key_renamed_by_structure", Unsafe;
    /// A list given for a scalar field, each element valid there, became one call per
    /// element (`Coercions::split_merged_calls`, on by default).
    MergedCallSplit = "merged_call_split", Unsafe;
    /// A JSON-encoded string given for an object/array field was decoded.
    JsonStringDecoded = "json_string_decoded", Safe;
    /// An object or array given for a string field meant to hold JSON text (by its name,
    /// description or `contentMediaType`: a file's content, a request body) became that
    /// JSON text, compact (`Coercions::json_strings`).
    JsonTextEncoded = "json_text_encoded", Unsafe;
    /// A date or date-time in another common format normalised to ISO 8601.
    DateNormalized = "date_normalized", Unsafe;
    /// `null` given for an optional field: the field was omitted.
    NullOmitted = "null_omitted", Safe;
    /// Arguments nested under one key (`input`, `arguments`, the tool's name …) unwrapped.
    ArgumentsUnwrapped = "arguments_unwrapped", Safe;
}

impl FixKind {
    /// True when the default options make this fix wherever it applies: a repair of the
    /// text or its envelope (lax mode; strict makes none), a coercion whose switch is on
    /// in [`Coercions::default`](crate::schema::Coercions) (`merged_call_split` among
    /// them); not a fix only an opt-in makes (`arguments_corrected`, a correction
    /// model's; `arguments_salvaged`, an unresolved-call hook's). With [`safety`](Self::safety),
    /// what the help and the README list as the unsafe fixes that run by default.
    pub fn runs_by_default(self) -> bool {
        match self {
            // A correction model's or a hook's doing, and a scope the user opens: none
            // runs unless asked for.
            FixKind::ArgumentsCorrected
            | FixKind::ArgumentsSalvaged
            | FixKind::CorrectionBeyondIssues => false,
            kind => crate::schema::Coercions::switch_of(kind)
                .is_none_or(|s| crate::schema::Coercions::default().get(s) == Some(true)),
        }
    }
}

impl std::fmt::Display for FixKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// What kind of change.
    pub kind: FixKind,
    /// JSON Pointer of the value it touched (`""` for the whole arguments or the text).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Byte offset into the raw text, for syntax and envelope repairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// A few words on what changed (`"town" -> "city"`), may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Fix {
    /// A fix at a byte offset of the raw text.
    pub fn at(kind: FixKind, offset: usize) -> Self {
        Fix {
            kind,
            path: String::new(),
            offset: Some(offset),
            detail: String::new(),
        }
    }

    /// A fix of the value at a JSON Pointer.
    pub fn on(kind: FixKind, path: impl Into<String>, detail: impl Into<String>) -> Self {
        Fix {
            kind,
            path: path.into(),
            offset: None,
            detail: detail.into(),
        }
    }

    /// The fix for arguments replaced whole (`arguments_corrected` by a correction model,
    /// `arguments_salvaged` by an unresolved-call hook), in every front alike: the
    /// detail is `before -> after`, `before` the arguments the plan read (or, where it
    /// read none, the text the model sent), `after` the new arguments.
    pub fn replaced(
        kind: FixKind,
        before: Option<&serde_json::Value>,
        raw: &str,
        after: &serde_json::Value,
    ) -> Self {
        let before = before.map_or_else(|| raw.to_owned(), serde_json::Value::to_string);
        Fix::on(kind, "", format!("{before} -> {after}"))
    }

    /// Adds a detail.
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// The fix for a key given twice: `duplicate_key` when both values are equal,
    /// `duplicate_key_conflict` (unsafe: one reading was chosen) when they differ.
    pub fn duplicate_key(first: &serde_json::Value, last: &serde_json::Value) -> FixKind {
        if first == last {
            FixKind::DuplicateKey
        } else {
            FixKind::DuplicateKeyConflict
        }
    }

    /// The safety level of this fix's kind.
    pub fn safety(&self) -> Safety {
        self.kind.safety()
    }

    /// True when this fix lost information (the call was cut off, or a key was dropped).
    pub fn is_lossy(&self) -> bool {
        self.kind.safety() == Safety::Lossy
    }

    /// True when this fix marks a call the model never finished (a lossy fix other than a
    /// dropped key): what `refuse_lossy` refuses.
    pub fn is_cut_off(&self) -> bool {
        self.is_lossy() && self.kind != FixKind::UnknownKeyDropped
    }
}

impl std::fmt::Display for Fix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.id())?;
        if !self.path.is_empty() {
            write!(f, " at {}", self.path)?;
        } else if let Some(offset) = self.offset {
            write!(f, " at byte {offset}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{FixKind, Safety};
    use crate::schema::Coercions;

    #[test]
    fn every_switch_is_read_and_makes_a_fix() {
        for s in Coercions::SWITCHES {
            assert_eq!(Coercions::none().get(s), Some(false), "{s}");
            assert!(Coercions::default().get(s).is_some(), "{s}");
            assert!(
                FixKind::ALL
                    .iter()
                    .any(|k| Coercions::switch_of(*k) == Some(s)),
                "no fix of {s}"
            );
        }
        for k in FixKind::ALL {
            if let Some(s) = Coercions::switch_of(*k) {
                assert!(Coercions::SWITCHES.contains(&s), "{k}: {s}");
            }
        }
        assert_eq!(Coercions::default().get("nothing"), None);
    }

    #[test]
    fn what_runs_by_default() {
        let on = |k: FixKind| k.runs_by_default();
        assert!(on(FixKind::StringToInteger) && on(FixKind::KeyRenamed));
        assert!(on(FixKind::UnquotedString) && on(FixKind::TrailingComma));
        assert!(on(FixKind::MergedCallSplit));
        assert_eq!(FixKind::MergedCallSplit.safety(), Safety::Unsafe);
        assert!(!on(FixKind::ArgumentsCorrected) && !on(FixKind::ArgumentsSalvaged));
        assert_eq!(FixKind::StringToInteger.safety(), Safety::Unsafe);
    }
}
