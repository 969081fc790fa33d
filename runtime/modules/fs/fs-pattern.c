/* SPDX-License-Identifier: MIT */
/* Glob patterns (see fs-pattern.h): brace expansion into alternatives, each alternative a
 * list of segments, and a small NFA over segments so a tree walk matches every path
 * component once and prunes directories no alternative can enter. */
#include "buffer.h"
#include "fs-pattern.h"
#include "fs-utf8.h"
#include "macro.h"

typedef enum SegmentKind {
        SEGMENT_GLOB,
        SEGMENT_GLOBSTAR, /* "**": any number of directories not starting with '.' */
        SEGMENT_END,      /* the alternative is complete */
} SegmentKind;

typedef struct Segment {
        SegmentKind kind;
        char *text; /* SEGMENT_GLOB */
} Segment;

struct FsPattern {
        bool anchored;
        Segment *segments; /* all alternatives back to back, each ending with SEGMENT_END */
        size_t n_segments;
        uint32_t *starts;  /* first segment of each alternative */
        size_t n_alternatives;
        /* Scratch for de-duplicating states: marks[i] == generation means "already in".
         * A compiled pattern belongs to one call, so this needs no locking. */
        uint32_t *marks;
        uint32_t generation;
};

/* ---- one segment ------------------------------------------------------------------------- */

/* Next character of s as a code point; a byte that does not start a valid sequence maps to
 * a lone surrogate (never a real character) so that it only matches itself. */
static uint32_t next_char(const char **s) {
        const uint8_t *p = (const uint8_t *) *s;
        /* n = 4 is safe on a NUL-terminated string: the NUL fails as a continuation byte
         * before anything past it is looked at. */
        int k = fs_utf8_sequence_length(p, 4);

        if (k <= 0) {
                *s += 1;
                return 0xDC00u + p[0];
        }
        *s += k;
        switch (k) {
        case 1:
                return p[0];
        case 2:
                return ((uint32_t) (p[0] & 0x1F) << 6) | (p[1] & 0x3F);
        case 3:
                return ((uint32_t) (p[0] & 0x0F) << 12) | ((uint32_t) (p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        default:
                return ((uint32_t) (p[0] & 0x07) << 18) | ((uint32_t) (p[1] & 0x3F) << 12) |
                       ((uint32_t) (p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        }
}

static uint32_t next_pattern_char(const char **p) {
        if (**p == '\\' && (*p)[1] != 0)
                (*p)++;
        return next_char(p);
}

/* Match c against the class starting after '[' at *pp. Returns 1/0 and moves *pp past the
 * closing ']', or -1 when there is no closing ']' (then '[' is an ordinary character). */
static int match_class(const char **pp, uint32_t c) {
        const char *q = *pp;
        bool negate = false, matched = false, first = true;

        if (*q == '!' || *q == '^') {
                negate = true;
                q++;
        }
        for (;;) {
                if (*q == 0)
                        return -1;
                if (*q == ']' && !first) {
                        q++;
                        break;
                }
                first = false;
                uint32_t lo = next_pattern_char(&q), hi = lo;
                if (q[0] == '-' && q[1] != 0 && q[1] != ']') {
                        q++;
                        hi = next_pattern_char(&q);
                }
                if (lo <= c && c <= hi)
                        matched = true;
        }
        *pp = q;
        return matched != negate;
}

bool fs_pattern_match_segment(const char *pattern, const char *name) {
        const char *p = pattern, *n = name, *star_p = NULL, *star_n = NULL;

        /* No DOTMATCH: a leading '.' must be matched by a literal '.'. */
        if (name[0] == '.' && !(pattern[0] == '.' || (pattern[0] == '\\' && pattern[1] == '.')))
                return false;

        while (*n) {
                if (*p == '*') {
                        while (*p == '*')
                                p++;
                        star_p = p;
                        star_n = n;
                        continue;
                }
                if (*p == '?') {
                        p++;
                        next_char(&n);
                        continue;
                }
                if (*p == '[') {
                        const char *q = p + 1, *nn = n;
                        int m = match_class(&q, next_char(&nn));
                        if (m > 0) {
                                p = q;
                                n = nn;
                                continue;
                        }
                        if (m == 0)
                                goto backtrack;
                        /* no closing ']': a literal '[' */
                }
                if (*p != 0) {
                        const char *q = p, *nn = n;
                        if (next_pattern_char(&q) == next_char(&nn)) {
                                p = q;
                                n = nn;
                                continue;
                        }
                }
        backtrack:
                if (!star_p)
                        return false;
                /* Let the last '*' swallow one more character and retry from there. */
                next_char(&star_n);
                n = star_n;
                p = star_p;
        }

        while (*p == '*')
                p++;
        return *p == 0;
}

/* ---- brace expansion ------------------------------------------------------------------------ */

typedef struct StringList {
        char **items;
        size_t n;
} StringList;

static void string_list_done(StringList *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i]);
        free(l->items);
        *l = (StringList) {};
}

static int string_list_add(StringList *l, char *s) {
        char **n = reallocarray(l->items, l->n + 1, sizeof(char *));
        if (!n) {
                free(s);
                return -ENOMEM;
        }
        l->items = n;
        l->items[l->n++] = s;
        return 0;
}

/* Index just past the end of a [...] class starting at s[i] == '[', or i + 1 if unterminated. */
static size_t skip_class(const char *s, size_t i, size_t n) {
        size_t j = i + 1;

        if (j < n && (s[j] == '!' || s[j] == '^'))
                j++;
        if (j < n && s[j] == ']')
                j++;
        for (; j < n; j++) {
                if (s[j] == '\\' && j + 1 < n)
                        j++;
                else if (s[j] == ']')
                        return j + 1;
        }
        return i + 1;
}

/* Find the first brace group in s[0..n) with a matching '}'. */
static bool find_group(const char *s, size_t n, size_t *ret_open, size_t *ret_close) {
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '\\') {
                        i++;
                        continue;
                }
                if (s[i] == '[') {
                        i = skip_class(s, i, n) - 1;
                        continue;
                }
                if (s[i] != '{')
                        continue;

                unsigned depth = 0;
                for (size_t j = i; j < n; j++) {
                        if (s[j] == '\\') {
                                j++;
                                continue;
                        }
                        if (s[j] == '[') {
                                j = skip_class(s, j, n) - 1;
                                continue;
                        }
                        if (s[j] == '{')
                                depth++;
                        else if (s[j] == '}' && --depth == 0) {
                                *ret_open = i;
                                *ret_close = j;
                                return true;
                        }
                }
                /* unbalanced: this '{' is literal, look for a later group */
        }
        return false;
}

/* Nesting and chaining of groups, bounded so that a hostile pattern cannot exhaust a
 * thread's stack. */
#define EXPAND_MAX_DEPTH 64u

static int expand(const char *s, size_t n, unsigned depth, StringList *ret);

static int concat3(const char *a, size_t an, const char *b, size_t bn, const char *c, char **ret) {
        size_t cn = strlen(c);
        char *p = malloc(an + bn + cn + 1);

        if (!p)
                return -ENOMEM;
        memcpy(p, a, an);
        memcpy(p + an, b, bn);
        memcpy(p + an + bn, c, cn + 1);
        *ret = p;
        return 0;
}

static int expand(const char *s, size_t n, unsigned depth, StringList *ret) {
        _cleanup_(string_list_done) StringList out = {}, suffixes = {};
        _cleanup_free_ size_t *parts = NULL;
        size_t open, close, n_parts = 0;
        int r;

        if (depth > EXPAND_MAX_DEPTH)
                return -E2BIG;

        if (!find_group(s, n, &open, &close)) {
                char *copy = strndup(s, n);
                if (!copy)
                        return -ENOMEM;
                r = string_list_add(&out, copy);
                if (r < 0)
                        return r;
                *ret = out;
                out = (StringList) {};
                return 0;
        }

        r = expand(s + close + 1, n - close - 1, depth + 1, &suffixes);
        if (r < 0)
                return r;

        /* Split the group at its top-level commas: parts[k] is where part k starts, the
         * last entry is one past the closing brace. */
        parts = malloc((close - open + 2) * sizeof(size_t));
        if (!parts)
                return -ENOMEM;
        unsigned level = 0;
        parts[n_parts++] = open + 1;
        for (size_t j = open + 1; j < close; j++) {
                if (s[j] == '\\') {
                        j++;
                        continue;
                }
                if (s[j] == '[') {
                        j = skip_class(s, j, close) - 1;
                        continue;
                }
                if (s[j] == '{')
                        level++;
                else if (s[j] == '}')
                        level--;
                else if (s[j] == ',' && level == 0)
                        parts[n_parts++] = j + 1;
        }
        parts[n_parts] = close + 1;
        bool literal = n_parts == 1; /* "{x}" is not a choice */

        for (size_t k = 0; k < n_parts; k++) {
                _cleanup_(string_list_done) StringList alts = {};
                size_t from = parts[k], len = parts[k + 1] - 1 - from;

                r = expand(s + from, len, depth + 1, &alts);
                if (r < 0)
                        return r;
                if (out.n + alts.n * suffixes.n > FS_PATTERN_MAX_EXPANSIONS)
                        return -E2BIG;

                for (size_t a = 0; a < alts.n; a++)
                        for (size_t b = 0; b < suffixes.n; b++) {
                                _cleanup_free_ char *middle = NULL;
                                char *full;

                                if (literal) {
                                        if (asprintf(&middle, "{%s}", alts.items[a]) < 0)
                                                return -ENOMEM;
                                }
                                const char *mid = middle ?: alts.items[a];
                                r = concat3(s, open, mid, strlen(mid), suffixes.items[b], &full);
                                if (r < 0)
                                        return r;
                                r = string_list_add(&out, full);
                                if (r < 0)
                                        return r;
                        }
        }

        *ret = out;
        out = (StringList) {};
        return 0;
}

/* ---- compiling ----------------------------------------------------------------------------- */

static bool has_dotdot_segment(const char *s) {
        /* deepagents also treats '\' as a separator for this check. */
        for (const char *p = s;;) {
                size_t k = strcspn(p, "/\\");
                if (k == 2 && p[0] == '.' && p[1] == '.')
                        return true;
                if (p[k] == 0)
                        return false;
                p += k + 1;
        }
}

static int add_segment(FsPattern *p, SegmentKind kind, const char *text, size_t len) {
        Segment *n = reallocarray(p->segments, p->n_segments + 1, sizeof(Segment));
        if (!n)
                return -ENOMEM;
        p->segments = n;
        p->segments[p->n_segments] = (Segment) { .kind = kind };
        if (kind == SEGMENT_GLOB) {
                p->segments[p->n_segments].text = strndup(text, len);
                if (!p->segments[p->n_segments].text)
                        return -ENOMEM;
        }
        p->n_segments++;
        return 0;
}

static int add_alternative(FsPattern *p, const char *alt) {
        size_t len = strlen(alt);
        int r;

        /* A trailing '/' asks for directories; glob and grep only ever match files. */
        if (p->anchored && len > 0 && alt[len - 1] == '/')
                return 0;

        uint32_t *starts = reallocarray(p->starts, p->n_alternatives + 1, sizeof(uint32_t));
        if (!starts)
                return -ENOMEM;
        p->starts = starts;
        p->starts[p->n_alternatives++] = (uint32_t) p->n_segments;

        if (!p->anchored) {
                r = add_segment(p, SEGMENT_GLOB, alt, len);
                return r < 0 ? r : add_segment(p, SEGMENT_END, NULL, 0);
        }

        bool last_was_globstar = false;
        for (const char *s = alt; *s;) {
                size_t k = strcspn(s, "/");
                if (k > 0) { /* "a//b" is "a/b" */
                        last_was_globstar = k == 2 && s[0] == '*' && s[1] == '*';
                        r = add_segment(p, last_was_globstar ? SEGMENT_GLOBSTAR : SEGMENT_GLOB, s, k);
                        if (r < 0)
                                return r;
                }
                s += k;
                if (*s == '/')
                        s++;
        }
        /* A trailing "**" names what is below the directory, not the directory itself:
         * one more level at least. */
        if (last_was_globstar) {
                r = add_segment(p, SEGMENT_GLOB, "*", 1);
                if (r < 0)
                        return r;
        }
        return add_segment(p, SEGMENT_END, NULL, 0);
}

FsPattern *fs_pattern_free(FsPattern *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_segments; i++)
                free(p->segments[i].text);
        free(p->segments);
        free(p->starts);
        free(p->marks);
        free(p);
        return NULL;
}

int fs_pattern_compile(const char *pattern, FsPattern **ret) {
        _cleanup_(string_list_done) StringList alts = {};
        _cleanup_(fs_pattern_freep) FsPattern *p = NULL;
        size_t len = strlen(pattern);
        int r;

        if (len > FS_PATTERN_MAX_LENGTH)
                return -E2BIG;
        if (has_dotdot_segment(pattern))
                return -EINVAL;

        p = calloc(1, sizeof(FsPattern));
        if (!p)
                return -ENOMEM;
        p->anchored = strchr(pattern, '/') != NULL;

        /* A leading '/' anchors to the search root, nothing more. */
        while (*pattern == '/')
                pattern++;

        r = expand(pattern, strlen(pattern), 0, &alts);
        if (r < 0)
                return r;
        for (size_t i = 0; i < alts.n; i++) {
                if (alts.items[i][0] == 0)
                        continue; /* matches nothing */
                r = add_alternative(p, alts.items[i]);
                if (r < 0)
                        return r;
        }

        p->marks = calloc(MAX(p->n_segments, (size_t) 1), sizeof(uint32_t));
        if (!p->marks)
                return -ENOMEM;

        *ret = TAKE_PTR(p);
        return 0;
}

bool fs_pattern_is_anchored(const FsPattern *p) {
        return p->anchored;
}

/* ---- matching ------------------------------------------------------------------------------ */

void fs_pattern_states_done(FsPatternStates *s) {
        free(s->items);
        *s = (FsPatternStates) {};
}

/* Add state i and what it reaches without consuming a name ("**" may match nothing). */
static int add_state(FsPattern *p, FsPatternStates *s, uint32_t i) {
        for (;;) {
                if (p->marks[i] == p->generation)
                        return 0;
                p->marks[i] = p->generation;

                uint32_t *n = reallocarray(s->items, s->n + 1, sizeof(uint32_t));
                if (!n)
                        return -ENOMEM;
                s->items = n;
                s->items[s->n++] = i;

                if (p->segments[i].kind != SEGMENT_GLOBSTAR)
                        return 0;
                i++;
        }
}

static void new_generation(FsPattern *p) {
        if (++p->generation == 0) {
                memset(p->marks, 0, MAX(p->n_segments, (size_t) 1) * sizeof(uint32_t));
                p->generation = 1;
        }
}

int fs_pattern_states_initial(const FsPattern *cp, FsPatternStates *ret) {
        FsPattern *p = (FsPattern *) cp;
        FsPatternStates s = {};
        int r;

        new_generation(p);
        for (size_t a = 0; a < p->n_alternatives; a++) {
                r = add_state(p, &s, p->starts[a]);
                if (r < 0) {
                        fs_pattern_states_done(&s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

int fs_pattern_states_advance(const FsPattern *cp, const FsPatternStates *from, const char *name,
                              FsPatternStates *ret) {
        FsPattern *p = (FsPattern *) cp;
        FsPatternStates s = {};
        int r = 0;

        if (!p->anchored) {
                /* Basename patterns look into every directory. */
                return fs_pattern_states_initial(p, ret);
        }

        new_generation(p);
        for (size_t k = 0; k < from->n && r >= 0; k++) {
                uint32_t i = from->items[k];
                const Segment *seg = &p->segments[i];

                if (seg->kind == SEGMENT_GLOBSTAR) {
                        if (name[0] != '.')
                                r = add_state(p, &s, i);
                } else if (seg->kind == SEGMENT_GLOB && fs_pattern_match_segment(seg->text, name))
                        r = add_state(p, &s, i + 1);
        }
        if (r < 0) {
                fs_pattern_states_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

bool fs_pattern_states_match_file(const FsPattern *p, const FsPatternStates *in, const char *name) {
        for (size_t k = 0; k < in->n; k++) {
                uint32_t i = in->items[k];
                const Segment *seg = &p->segments[i];

                if (seg->kind == SEGMENT_GLOB && p->segments[i + 1].kind == SEGMENT_END &&
                    fs_pattern_match_segment(seg->text, name))
                        return true;
        }
        return false;
}

bool fs_pattern_states_alive(const FsPattern *p, const FsPatternStates *s) {
        if (!p->anchored)
                return p->n_alternatives > 0;
        for (size_t k = 0; k < s->n; k++)
                if (p->segments[s->items[k]].kind != SEGMENT_END)
                        return true;
        return false;
}

bool fs_pattern_match(const FsPattern *p, const char *relative_path) {
        _cleanup_(fs_pattern_states_done) FsPatternStates states = {};
        _cleanup_free_ char *copy = strdup(relative_path);
        char *s, *slash;

        if (!copy)
                return false;
        if (!p->anchored) {
                slash = strrchr(copy, '/');
                const char *base = slash ? slash + 1 : copy;
                for (size_t a = 0; a < p->n_alternatives; a++)
                        if (fs_pattern_match_segment(p->segments[p->starts[a]].text, base))
                                return true;
                return false;
        }

        if (fs_pattern_states_initial(p, &states) < 0)
                return false;
        for (s = copy; (slash = strchr(s, '/')); s = slash + 1) {
                FsPatternStates next = {};
                *slash = 0;
                if (*s == 0)
                        continue;
                if (fs_pattern_states_advance(p, &states, s, &next) < 0)
                        return false;
                fs_pattern_states_done(&states);
                states = next;
        }
        return fs_pattern_states_match_file(p, &states, s);
}
