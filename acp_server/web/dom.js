// The viewer's one DOM helper: elements built from text and attributes, never from HTML, so
// that nothing received is ever parsed as markup.

/** `tag` with `attrs` (`class`, `text`, `data-*`, or element properties; null, undefined and
 * false are left out) and `children` (nodes, or strings as text). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "role" || key === "for" || key === "list") {
      node.setAttribute(key, String(value));
    } else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
