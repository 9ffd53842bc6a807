// The viewer's numbers, sizes and times, formatted for the reader's locale. No DOM, no I/O.

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export function formatTime(value) {
  if (value === null || value === undefined) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : dateFormat.format(date);
}

export function relativeTime(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return "";
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds < 60) return "just now";
  const units = [
    [60, "minute"],
    [3600, "hour"],
    [86400, "day"],
  ];
  let [size, unit] = units[0];
  for (const [s, u] of units) if (seconds >= s) [size, unit] = [s, u];
  const count = Math.floor(seconds / size);
  return `${count} ${unit}${count === 1 ? "" : "s"} ago`;
}

const integer = new Intl.NumberFormat(undefined);
export const number = (value) => (value === null || value === undefined ? "–" : integer.format(value));

export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Context used: "12,345 of 200,000 (6%)", or "12,345" when the window is not known. */
export function contextText(used, size) {
  if (!size) return number(used);
  return `${number(used)} of ${number(size)} (${Math.round((used / size) * 100)}%)`;
}

/** A cost `{amount, currency}` in its currency, or "–". */
export function costText(cost) {
  if (!cost) return "–";
  const digits = cost.amount < 1 ? 4 : 2;
  try {
    return new Intl.NumberFormat(undefined, { style: "currency", currency: cost.currency, maximumFractionDigits: digits }).format(cost.amount);
  } catch {
    return `${cost.amount.toFixed(digits)} ${cost.currency}`;
  }
}
