//! Deterministic id assignment for `task_write`.

use std::collections::{HashMap, HashSet};

use super::model::{Task, TaskDraft};

/// Maximum length of the slug part of a generated id.
const SLUG_MAX_LEN: usize = 48;

/// Slug of a task's content: lowercase ASCII letters and digits, runs of anything else
/// collapsed to one `_`, at most 48 characters.
///
/// Like the reference, a separator is written before the next kept character is known to
/// fit, so a slug cut at exactly 48 characters may end with `_`.
pub fn slugify(content: &str) -> String {
    let mut slug = String::new();
    let mut separator_pending = false;
    // Full Unicode lowercasing first: a few non-ASCII letters lowercase to ASCII (e.g. the
    // Kelvin sign to `k`), exactly as JavaScript's `toLowerCase` does.
    for c in content.to_lowercase().chars() {
        if !(c.is_ascii_lowercase() || c.is_ascii_digit()) {
            separator_pending = !slug.is_empty();
            continue;
        }
        if separator_pending && !slug.is_empty() && slug.len() < SLUG_MAX_LEN {
            slug.push('_');
        }
        if slug.len() >= SLUG_MAX_LEN {
            break;
        }
        slug.push(c);
        separator_pending = false;
    }
    slug
}

/// The generated id of the `occurrence`-th (1-based) task with this content.
fn fallback_id(content: &str, occurrence: usize) -> String {
    let slug = slugify(content);
    let base = if slug.is_empty() { "item" } else { &slug };
    if occurrence > 1 {
        format!("task_{base}_{occurrence}")
    } else {
        format!("task_{base}")
    }
}

/// `id`, or the first of `id_2`, `id_3`, … that is neither used nor reserved.
fn unique_id(id: String, used: &HashSet<String>, reserved: &HashSet<&str>) -> String {
    let taken = |candidate: &str| used.contains(candidate) || reserved.contains(candidate);
    if !taken(&id) {
        return id;
    }
    (2..)
        .map(|n| format!("{id}_{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or(id)
}

/// The requested id of a draft; an empty id counts as none (the reference tests truthiness).
fn requested(draft: &TaskDraft) -> Option<&str> {
    draft.id.as_deref().filter(|id| !id.is_empty())
}

/// For each id-less draft whose content is unique among the id-less drafts, the id of the
/// single previous task with that exact content, when exactly one such task exists once
/// previous tasks whose id is requested explicitly are set aside.
fn reusable_ids<'a>(
    drafts: &[TaskDraft],
    previous: &'a [Task],
    explicit: &HashSet<&str>,
) -> HashMap<usize, &'a str> {
    let mut idless_counts: HashMap<&str, usize> = HashMap::new();
    for draft in drafts.iter().filter(|d| requested(d).is_none()) {
        *idless_counts.entry(draft.content.as_str()).or_default() += 1;
    }
    let mut reusable = HashMap::new();
    for (index, draft) in drafts.iter().enumerate() {
        if requested(draft).is_some() || idless_counts.get(draft.content.as_str()) != Some(&1) {
            continue;
        }
        let mut matches = previous
            .iter()
            .filter(|p| p.content == draft.content && !explicit.contains(p.id.as_str()));
        if let (Some(only), None) = (matches.next(), matches.next()) {
            reusable.insert(index, only.id.as_str());
        }
    }
    reusable
}

/// Gives every draft an id, keeping ids stable across rewrites of the list.
pub fn assign_ids(drafts: &[TaskDraft], previous: &[Task]) -> Vec<Task> {
    let explicit: HashSet<&str> = drafts.iter().filter_map(requested).collect();
    let reusable = reusable_ids(drafts, previous, &explicit);
    let reserved: HashSet<&str> = explicit.iter().chain(reusable.values()).copied().collect();

    let mut used: HashSet<String> = HashSet::new();
    let mut occurrences: HashMap<&str, usize> = HashMap::new();
    drafts
        .iter()
        .enumerate()
        .map(|(index, draft)| {
            let occurrence = occurrences.entry(draft.content.as_str()).or_default();
            *occurrence += 1;
            let explicit_id = requested(draft).filter(|id| !used.contains(*id));
            let reused_id = reusable
                .get(&index)
                .copied()
                .filter(|id| !used.contains(*id));
            // A repeated explicit id keeps its first task; later duplicates get a generated
            // id instead of failing the whole write.
            let id = match explicit_id.or(reused_id) {
                Some(id) => id.to_owned(),
                None => unique_id(fallback_id(&draft.content, *occurrence), &used, &reserved),
            };
            used.insert(id.clone());
            Task {
                id,
                content: draft.content.clone(),
                status: draft.status,
                active_form: draft.active_form.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::model::TaskStatus;

    fn draft(id: Option<&str>, content: &str) -> TaskDraft {
        TaskDraft {
            id: id.map(str::to_owned),
            content: content.to_owned(),
            status: TaskStatus::Pending,
            active_form: format!("Doing {content}"),
        }
    }

    fn task(id: &str, content: &str) -> Task {
        Task {
            id: id.to_owned(),
            content: content.to_owned(),
            status: TaskStatus::Pending,
            active_form: "x".to_owned(),
        }
    }

    fn ids(tasks: &[Task]) -> Vec<&str> {
        tasks.iter().map(|t| t.id.as_str()).collect()
    }

    #[test]
    fn slug_examples_from_spec() {
        assert_eq!(
            fallback_id("Investigate the failing tests!", 1),
            "task_investigate_the_failing_tests"
        );
        assert_eq!(fallback_id("!!!", 1), "task_item");
        assert_eq!(
            fallback_id("Ünïcode café déjà  vu -- Step #2", 1),
            "task_n_code_caf_d_j_vu_step_2"
        );
        assert_eq!(fallback_id("A & <b>", 1), "task_a_b");
        assert_eq!(fallback_id("Fix bug", 2), "task_fix_bug_2");
    }

    #[test]
    fn slug_stops_at_48_characters_mid_word() {
        let content = "word ".repeat(30);
        assert_eq!(
            slugify(&content),
            "word_word_word_word_word_word_word_word_word_wor"
        );
    }

    #[test]
    fn slug_cut_right_after_a_separator_keeps_it() {
        // 47 kept characters, then a separator, then more: the reference writes the `_`
        // (reaching 48) before noticing the limit.
        let content = format!("{} b", "a".repeat(47));
        assert_eq!(slugify(&content), format!("{}_", "a".repeat(47)));
    }

    #[test]
    fn slug_lowercases_non_ascii_letters_that_map_to_ascii() {
        // U+212A KELVIN SIGN lowercases to ASCII `k`; U+0130 to `i` + combining dot.
        assert_eq!(slugify("\u{212A}elvin \u{130}stanbul"), "kelvin_i_stanbul");
    }

    #[test]
    fn duplicate_content_gets_numbered() {
        let out = assign_ids(&[draft(None, "Fix bug"), draft(None, "Fix bug")], &[]);
        assert_eq!(ids(&out), ["task_fix_bug", "task_fix_bug_2"]);
    }

    #[test]
    fn duplicate_explicit_id_keeps_first() {
        let out = assign_ids(&[draft(Some("x"), "A"), draft(Some("x"), "B")], &[]);
        assert_eq!(ids(&out), ["x", "task_b"]);
    }

    #[test]
    fn generated_id_avoids_later_explicit_id() {
        let out = assign_ids(
            &[
                draft(None, "Write tests"),
                draft(Some("task_write_tests"), "Run checks"),
            ],
            &[],
        );
        assert_eq!(ids(&out), ["task_write_tests_2", "task_write_tests"]);
    }

    #[test]
    fn reuse_and_collisions_with_previous_ids() {
        let previous = [
            task("task_review", "Review"),
            task("task_review_2", "Other"),
        ];
        let out = assign_ids(
            &[
                draft(None, "Review"),
                draft(None, "Other"),
                draft(Some("task_review"), "New"),
            ],
            &previous,
        );
        assert_eq!(ids(&out), ["task_review_3", "task_review_2", "task_review"]);
    }

    #[test]
    fn ambiguous_previous_content_is_not_reused() {
        let previous = [task("first", "Review diff"), task("second", "Review diff")];
        let out = assign_ids(&[draft(None, "Review diff")], &previous);
        assert_eq!(ids(&out), ["task_review_diff"]);
    }

    #[test]
    fn reuse_ignores_previous_tasks_whose_id_is_requested_explicitly() {
        let previous = [task("first", "Review diff"), task("second", "Review diff")];
        let out = assign_ids(
            &[draft(None, "Review diff"), draft(Some("first"), "Other")],
            &previous,
        );
        assert_eq!(ids(&out), ["second", "first"]);
    }

    #[test]
    fn reuse_is_case_sensitive() {
        let previous = [task("old", "review diff")];
        let out = assign_ids(&[draft(None, "Review diff")], &previous);
        assert_eq!(ids(&out), ["task_review_diff"]);
    }

    #[test]
    fn empty_explicit_id_counts_as_none() {
        let out = assign_ids(&[draft(Some(""), "A")], &[]);
        assert_eq!(ids(&out), ["task_a"]);
    }
}
