// A small Markdown renderer for model replies: fenced code, headings, lists, block quotes,
// tables, rules and paragraphs; inline code, bold, italic, strike-through and links. It builds
// DOM nodes (text is never parsed as HTML) and tolerates half-written input, since replies are
// re-rendered as they stream in: an unclosed fence renders as a code block so far.

import { h } from "./dom.js";

const FENCE = /^ {0,3}(```+|~~~+)\s*([\w+#.-]*)\s*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)([-*+])\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

/** Renders Markdown text into a DocumentFragment. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  for (const node of blocks(text.replace(/\r\n?/g, "\n").split("\n"))) fragment.append(node);
  return fragment;
}

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i += 1;
    } else if ((m = FENCE.exec(line))) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(m[1])) body.push(lines[i++]);
      i += 1;
      out.push(codeBlock(body.join("\n"), m[2]));
    } else if ((m = HEADING.exec(line))) {
      out.push(h(`h${Math.min(6, m[1].length + 2)}`, {}, inline(m[2])));
      i += 1;
    } else if (RULE.test(line)) {
      out.push(h("hr"));
      i += 1;
    } else if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i += 1; }
      out.push(h("blockquote", {}, blocks(body)));
    } else if (BULLET.test(line) || ORDERED.test(line)) {
      i = list(lines, i, out);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      i = table(lines, i, out);
    } else {
      const body = [];
      while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) body.push(lines[i++].trim());
      out.push(h("p", {}, inline(body.join("\n"))));
    }
  }
  return out;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    BULLET.test(line) || ORDERED.test(line);
}

function codeBlock(code, lang) {
  const pre = h("pre", { tabindex: "0" }, h("code", lang ? { class: `language-${lang}` } : {}, code));
  if (lang) pre.append(h("span", { class: "code-lang", "aria-hidden": "true" }, lang));
  return pre;
}

function list(lines, start, out) {
  const first = BULLET.exec(lines[start]) || ORDERED.exec(lines[start]);
  const ordered = !BULLET.test(lines[start]);
  const indent = first[1].length;
  const el = h(ordered ? "ol" : "ul", ordered && first[2] !== "1" ? { start: first[2] } : {});
  let i = start;
  let item = null;
  while (i < lines.length) {
    const line = lines[i];
    const m = (ordered ? ORDERED : BULLET).exec(line);
    if (m && m[1].length === indent) {
      item = [m[3]];
      el.append(h("li"));
      el.lastChild.itemLines = item;
      i += 1;
    } else if (line.trim() && /^\s+/.test(line) && line.search(/\S/) > indent) {
      item.push(line.slice(Math.min(line.search(/\S/), indent + 2)));
      i += 1;
    } else if (!line.trim() && i + 1 < lines.length && /^\s+\S/.test(lines[i + 1]) && lines[i + 1].search(/\S/) > indent) {
      item.push("");
      i += 1;
    } else {
      break;
    }
  }
  for (const li of el.children) {
    const inner = li.itemLines;
    delete li.itemLines;
    if (inner.length === 1) li.append(inline(inner[0]));
    else for (const node of blocks(inner)) li.append(node.tagName === "P" ? inline(node.textContent) : node);
  }
  out.push(el);
  return i;
}

function cells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

function table(lines, start, out) {
  const head = cells(lines[start]);
  const align = cells(lines[start + 1]).map((c) =>
    c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : null);
  const style = (j) => (align[j] ? { style: `text-align:${align[j]}` } : {});
  const tbody = h("tbody");
  let i = start + 2;
  while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
    tbody.append(h("tr", {}, cells(lines[i]).map((c, j) => h("td", style(j), inline(c)))));
    i += 1;
  }
  out.push(h("table", {}, h("thead", {}, h("tr", {}, head.map((c, j) => h("th", style(j), inline(c))))), tbody));
  return i;
}

// Inline spans, first match wins: code, links, bold, italic, strike-through, hard breaks.
const INLINE = [
  [/^`+/, (m, rest) => {
    const close = rest.indexOf(m[0], m[0].length);
    if (close < 0) return null;
    return [h("code", {}, rest.slice(m[0].length, close).trim()), close + m[0].length];
  }],
  [/^\[([^\]\n]+)\]\(([^)\s]+)\)/, (m) => [link(m[1], m[2]), m[0].length]],
  [/^(\*\*|__)(?=\S)([\s\S]*?\S)\1/, (m) => [h("strong", {}, inline(m[2])), m[0].length]],
  [/^~~(?=\S)([\s\S]*?\S)~~/, (m) => [h("del", {}, inline(m[1])), m[0].length]],
  [/^(\*|_)(?=\S)([\s\S]*?\S)\1(?![\w*])/, (m) => [h("em", {}, inline(m[2])), m[0].length]],
  [/^ {2,}\n|^\\\n/, (m) => [h("br"), m[0].length]],
];

/** Only links that cannot run script: http(s), mailto, in-page and relative. */
function link(text, href) {
  const safe = /^(https?:|mailto:|#|\/(?!\/))/i.test(href);
  if (!safe) return document.createTextNode(`[${text}](${href})`);
  return h("a", { href, rel: "noopener noreferrer", target: "_blank" }, inline(text));
}

function inline(text) {
  const fragment = document.createDocumentFragment();
  let plain = "";
  let i = 0;
  const flush = () => { if (plain) fragment.append(plain); plain = ""; };
  outer: while (i < text.length) {
    const ch = text[i];
    if (ch === "\\" && i + 1 < text.length && /[\\`*_~[\]()#|>-]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if ("`[*_~ \\".includes(ch)) {
      const rest = text.slice(i);
      for (const [re, make] of INLINE) {
        const m = re.exec(rest);
        if (!m) continue;
        // `_` inside a word (snake_case) is not emphasis.
        if (ch === "_" && i > 0 && /\w/.test(text[i - 1])) break;
        const made = make(m, rest);
        if (!made) continue;
        flush();
        fragment.append(made[0]);
        i += made[1];
        continue outer;
      }
    }
    plain += ch;
    i += 1;
  }
  flush();
  return fragment;
}
