"""JSON-schema string patterns the built-in tools share."""

# A line of text: no CR/LF, so it can never smuggle a mail header.
SINGLE_LINE = r"^[^\r\n]*$"
# At least one non-space character.
NOT_BLANK = r"\S"
