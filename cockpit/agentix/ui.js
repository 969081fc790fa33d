// SPDX-License-Identifier: MIT
// Small helpers every view uses: building elements, the error banner, numbers people read.
import { describeError } from './agentd.js';

export function $(id) {
    return document.getElementById(id);
}

// An element with text content (never HTML: every string shown may come from a user).
export function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null)
        e.textContent = String(text);
    if (className)
        e.className = className;
    return e;
}

export function row(cells) {
    const tr = document.createElement('tr');
    for (const c of cells)
        tr.appendChild(c instanceof Node ? wrapCell(c) : el('td', c));
    return tr;
}

function wrapCell(node) {
    if (node.tagName === 'TD')
        return node;
    const td = document.createElement('td');
    td.appendChild(node);
    return td;
}

// agentd's message, as it wrote it, in the banner at the top.
export function showError(e) {
    $('error-text').textContent = describeError(e);
    $('error').hidden = false;
}

export function clearError() {
    $('error').hidden = true;
    $('error-text').textContent = '';
}

export function bytes(n) {
    if (n === undefined || n === null)
        return '';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = Number(n);
    while (v >= 1024 && i < units.length - 1) {
        v /= 1024;
        i++;
    }
    return (i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)) + ' ' + units[i];
}

// Microseconds since the epoch (agentd's CreatedAt, ExpiresAt) as a local date and time.
export function usecTime(usec) {
    if (!usec)
        return '';
    return new Date(Number(usec) / 1000).toLocaleString();
}

export function secTime(sec) {
    return sec ? new Date(Number(sec) * 1000).toLocaleString() : '';
}

export function dl(target, pairs) {
    target.replaceChildren();
    for (const [k, v] of pairs) {
        target.appendChild(el('dt', k));
        target.appendChild(el('dd', v));
    }
}
