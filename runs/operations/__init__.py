"""Operations: see README.md."""
