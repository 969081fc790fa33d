/* SPDX-License-Identifier: MIT */
#pragma once

/* Glob patterns with the deepagents 0.7 contract shared by glob() and grep(glob=…)
 * (compile_grep_include_glob, wcmatch with BRACE | GLOBSTAR and no DOTMATCH):
 *
 *   - a pattern without '/' matches the basename at any depth ("*.py" finds src/a/b.py,
 *     also below dot-directories);
 *   - a pattern with '/' matches the path relative to the search root, where a "**"
 *     segment stands for any number of directories but never one whose name starts with
 *     '.'; a leading '/' only anchors ("/ *.py" is the top level);
 *   - a name starting with '.' only matches a segment that starts with '.' itself;
 *   - *, ?, [abc], [a-z], [!x], [^x], \x escapes; {a,b} braces (nested, at most
 *     FS_PATTERN_MAX_EXPANSIONS alternatives; "{x}" is literal); a trailing '/' matches
 *     directories only (so no file); a ".." segment is refused.
 *
 * Matching is on UTF-8 characters ('?' is one character, not one byte). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_PATTERN_MAX_EXPANSIONS 1000u
#define FS_PATTERN_MAX_LENGTH 4096u

typedef struct FsPattern FsPattern;

/* Returns 0, -EINVAL for a ".." segment, -E2BIG for too many brace expansions or a
 * pattern longer than FS_PATTERN_MAX_LENGTH, or -ENOMEM. */
int fs_pattern_compile(const char *pattern, FsPattern **ret);
FsPattern *fs_pattern_free(FsPattern *p);

static inline void fs_pattern_freep(FsPattern **p) {
        if (*p)
                fs_pattern_free(*p);
}

/* Whether the pattern is matched against whole relative paths (it contains '/'). */
bool fs_pattern_is_anchored(const FsPattern *p);

/* One segment of a pattern against one name, with the leading-dot rule. */
bool fs_pattern_match_segment(const char *segment, const char *name);

/* Match a path relative to the search root ("src/a.py"). */
bool fs_pattern_match(const FsPattern *p, const char *relative_path);

/* Incremental matching for tree walks: the states after the directories walked so far. */
typedef struct FsPatternStates {
        uint32_t *items;
        size_t n;
} FsPatternStates;

void fs_pattern_states_done(FsPatternStates *s);

/* The states at the search root. */
int fs_pattern_states_initial(const FsPattern *p, FsPatternStates *ret);

/* The states after entering `name` from `from`. */
int fs_pattern_states_advance(const FsPattern *p, const FsPatternStates *from, const char *name,
                              FsPatternStates *ret);

/* Whether a file `name` in the directory with states `in` matches. */
bool fs_pattern_states_match_file(const FsPattern *p, const FsPatternStates *in, const char *name);

/* Whether anything below a directory whose states are `s` can still match. */
bool fs_pattern_states_alive(const FsPattern *p, const FsPatternStates *s);
