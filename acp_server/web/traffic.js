// What the viewer received, for its log figures: the bytes and frames of its WebSocket (a
// `WebSocket` that counts them), the history records of pages and snapshots, the chunk rows
// among them and the events decoded.

/** The UTF-8 length of a string, without encoding it. */
function utf8Length(text) {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code < 0xdc00) {
      bytes += 4; // a surrogate pair: one code point beyond the BMP
      i++;
    } else bytes += 3;
  }
  return bytes;
}

export const figures = {
  bytes: 0, // bytes of the frames received (after decompression)
  frames: 0,
  records: 0, // history records received in pages and snapshots
  rows: 0, // of which chunk rows
  decoded: 0, // events decoded from them, and from live frames
};

export class CountingSocket extends WebSocket {
  constructor(url) {
    super(url);
    this.addEventListener("message", (event) => {
      figures.frames += 1;
      if (typeof event.data === "string") figures.bytes += utf8Length(event.data);
    });
  }
}

export function countRecords(records) {
  for (const record of records ?? []) {
    figures.records += 1;
    if (record && record.chunks) {
      figures.rows += 1;
      const members = record.chunks.data?.texts ?? record.chunks.data?.args ?? [];
      figures.decoded += members.length;
    } else {
      figures.decoded += 1;
    }
  }
}
