// The prompt box's `/` commands (SPEC 4.4): which of the session's commands (its latest
// `available_commands_update`) a prompt being typed can complete to, and the text a chosen
// one leaves in the box. No dependencies, no DOM.

/** The command word being typed: `/ti` -> "ti"; null when the text is not a lone `/word` (a
 * command's arguments have started, or the text does not start with `/`). */
export function typedCommand(text) {
  const match = /^\/([^\s/]*)$/.exec(text);
  return match === null ? null : match[1];
}

/** The commands `text` can complete to, in the order the session listed them: those whose
 * name starts with the word typed, then those whose name merely contains it. */
export function completions(commands, text) {
  const word = typedCommand(text);
  if (word === null) return [];
  const lower = word.toLowerCase();
  const starts = commands.filter((c) => c.name.toLowerCase().startsWith(lower));
  const contains = commands.filter(
    (c) => !c.name.toLowerCase().startsWith(lower) && c.name.toLowerCase().includes(lower),
  );
  return [...starts, ...contains];
}

/** The text a chosen command leaves in the box: `/name `, ready for its argument. */
export function completed(command) {
  return `/${command.name} `;
}

/** A command's hint for its argument (`input.hint`), or "". */
export function commandHint(command) {
  return command?.input?.hint ?? "";
}
