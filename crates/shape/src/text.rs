//! The text form of shapes and layouts: a parser over bytes that other
//! parsers can embed, and `Display` implementations that print XLA's
//! canonical form.
//!
//! The grammar is XLA's (`docs/layouts.md` has it in full):
//!
//! ```text
//! shape  ::= array | '(' [shape (',' shape)*] ')' | 'b(' shape ')' | 'token[]' | 'opaque[]'
//! array  ::= type '[' [dim (',' dim)*] ']' [layout]
//! dim    ::= INT | '<=' INT | '?'
//! layout ::= '{' [INT (',' INT)*] [':' D(..) T(..)+ L(..) #(..) *(..) E(..) S(..) SC(..)+ P(..) M(..) PAD(..)] '}'
//! ```
//!
//! A `{` after `]` starts a layout only when an integer or `:` follows it;
//! otherwise it is left for the caller, since it may open a computation body. Whitespace and `/* ... */` comments are
//! allowed between tokens.

use std::fmt::{self, Write as _};

use smallvec::SmallVec;

use crate::{
    ArrayShape, DimLevel, DimLevelKind, Layout, MAX_RANK, MAX_TILE_LEVELS, PrimitiveType, Shape,
    SharedLayout, SplitConfig, Tile,
};

/// A syntax error in shape text: where it is (a byte offset into the text
/// given to the parser) and what was expected there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TextError {
    /// Byte offset of the offending token.
    pub offset: usize,
    /// What went wrong, phrased as what was expected.
    pub message: String,
}

/// Parses a whole string as one shape; surrounding whitespace is allowed.
pub fn parse_shape(text: &str) -> Result<Shape, TextError> {
    let mut p = ShapeParser::new(text.as_bytes(), 0);
    let shape = p.shape()?;
    p.skip_trivia();
    if p.pos != text.len() {
        return Err(p.error("expected the end of the shape"));
    }
    Ok(shape)
}

/// Parses one shape starting at byte `pos` of `text`. Returns the shape and
/// the byte offset just after it, so that an enclosing parser can go on.
pub fn parse_shape_at(text: &[u8], pos: usize) -> Result<(Shape, usize), TextError> {
    let mut p = ShapeParser::new(text, pos);
    let shape = p.shape()?;
    Ok((shape, p.pos))
}

/// Parses a layout given on its own, such as `{1,0:T(8,128)(2,1)}`.
pub fn parse_layout(text: &str) -> Result<Layout, TextError> {
    let mut p = ShapeParser::new(text.as_bytes(), 0);
    p.skip_trivia();
    if p.peek() != Some(b'{') {
        return Err(p.error("expected '{' to start a layout"));
    }
    let layout = p.layout()?;
    p.skip_trivia();
    if p.pos != text.len() {
        return Err(p.error("expected the end of the layout"));
    }
    Ok(layout)
}

/// A recursive-descent parser over shape text.
struct ShapeParser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> ShapeParser<'a> {
    fn new(text: &'a [u8], pos: usize) -> Self {
        ShapeParser { text, pos }
    }

    fn error(&self, message: impl Into<String>) -> TextError {
        TextError {
            offset: self.pos,
            message: message.into(),
        }
    }

    fn error_at(&self, offset: usize, message: impl Into<String>) -> TextError {
        TextError {
            offset,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    /// Skips whitespace and comments. An unterminated `/*` is left in place
    /// so that the next token check reports it.
    fn skip_trivia(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.text.get(self.pos + 1) == Some(&b'*') => {
                    match find(&self.text[self.pos + 2..], b"*/") {
                        Some(end) => self.pos += 2 + end + 2,
                        None => return,
                    }
                }
                _ => return,
            }
        }
    }

    /// Consumes `byte` after trivia, or fails saying what was expected.
    fn expect(&mut self, byte: u8, what: impl std::fmt::Display) -> Result<(), TextError> {
        self.skip_trivia();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {what}")))
        }
    }

    /// Consumes `byte` after trivia if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_trivia();
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> &'a [u8] {
        let start = self.pos;
        while matches!(
            self.peek(),
            Some(b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_')
        ) {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    /// Parses a signed decimal integer, rejecting overflow.
    fn int(&mut self, what: impl std::fmt::Display) -> Result<i64, TextError> {
        self.skip_trivia();
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let digits_start = self.pos;
        let mut value: i64 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            value = match value
                .checked_mul(10)
                .and_then(|v| v.checked_add(i64::from(c - b'0')))
            {
                Some(v) => v,
                None => return Err(self.error_at(start, format!("{what} is too large"))),
            };
            self.pos += 1;
        }
        if self.pos == digits_start {
            self.pos = start;
            return Err(self.error(format!("expected {what}")));
        }
        Ok(if negative { -value } else { value })
    }

    fn shape(&mut self) -> Result<Shape, TextError> {
        self.skip_trivia();
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let mut elements = Vec::new();
                if !self.eat(b')') {
                    loop {
                        elements.push(self.shape()?);
                        if self.eat(b')') {
                            break;
                        }
                        self.expect(b',', "',' or ')' in a tuple shape")?;
                    }
                }
                // A shape is kept for as long as its value lives, and each
                // element is some 200 bytes: a tuple of many elements
                // would keep up to half its size again in spare capacity.
                elements.shrink_to_fit();
                Ok(Shape::Tuple(elements))
            }
            Some(b'a'..=b'z' | b'A'..=b'Z') => {
                let start = self.pos;
                let name = self.ident();
                if name == b"b" && self.peek() == Some(b'(') {
                    self.pos += 1;
                    let inner = self.shape()?;
                    self.expect(b')', "')' to close a buffer shape")?;
                    return Ok(Shape::Buffer(Box::new(inner)));
                }
                let name = std::str::from_utf8(name).unwrap_or("");
                let Some(element_type) = PrimitiveType::from_name(name) else {
                    return Err(self.error_at(
                        start,
                        format!("expected an element type such as f32 or bf16, found '{name}'"),
                    ));
                };
                self.array(element_type, start)
            }
            _ => Err(self
                .error("expected a shape: an element type such as f32[2,3], or '(' for a tuple")),
        }
    }

    fn array(&mut self, element_type: PrimitiveType, start: usize) -> Result<Shape, TextError> {
        if self.peek() != Some(b'[') {
            return Err(self.error(format!("expected '[' after element type {element_type}")));
        }
        self.pos += 1;
        let mut dims = crate::Dims::new();
        let mut dynamic = 0u64;
        if !self.eat(b']') {
            loop {
                self.skip_trivia();
                if dims.len() == MAX_RANK {
                    return Err(
                        self.error(format!("rank exceeds the supported maximum of {MAX_RANK}"))
                    );
                }
                let i = dims.len();
                if self.peek() == Some(b'?') {
                    self.pos += 1;
                    dims.push(ArrayShape::UNBOUNDED);
                    dynamic |= 1 << i;
                } else {
                    if self.text[self.pos..].starts_with(b"<=") {
                        self.pos += 2;
                        dynamic |= 1 << i;
                    }
                    let at = self.pos;
                    let d = self.int("a dimension size")?;
                    if d < 0 {
                        return Err(self.error_at(at, "expected a dimension size of 0 or more"));
                    }
                    dims.push(d);
                }
                if self.eat(b']') {
                    break;
                }
                self.expect(b',', "',' or ']' in the dimensions")?;
            }
        }
        if !element_type.is_array_type() {
            if !dims.is_empty() {
                return Err(self.error_at(
                    start,
                    format!("{element_type} takes no dimensions: write {element_type}[]"),
                ));
            }
            return Ok(if element_type == PrimitiveType::Token {
                Shape::Token
            } else {
                Shape::Opaque
            });
        }
        let mut array = ArrayShape {
            element_type,
            dims,
            dynamic,
            layout: None,
        };
        if self.layout_follows() {
            let at = self.pos;
            let layout = self.layout()?;
            if layout.minor_to_major.len() != array.rank() {
                return Err(self.error_at(
                    at,
                    format!(
                        "Dimensions size is {}, but minor to major size is {}.",
                        array.rank(),
                        layout.minor_to_major.len()
                    ),
                ));
            }
            array.layout = Some(SharedLayout::recent(layout));
        }
        Ok(Shape::Array(array))
    }

    /// The layout lookahead: a `{` opens a layout only when an integer, a
    /// `:` or `}` comes next, as in XLA, where `f32[2] {` may open a body.
    fn layout_follows(&mut self) -> bool {
        let save = self.pos;
        self.skip_trivia();
        if self.peek() != Some(b'{') {
            self.pos = save;
            return false;
        }
        let brace = self.pos;
        self.pos += 1;
        self.skip_trivia();
        let follows = matches!(self.peek(), Some(b'0'..=b'9' | b':'));
        self.pos = if follows { brace } else { save };
        follows
    }

    fn layout(&mut self) -> Result<Layout, TextError> {
        self.expect(b'{', "'{' to start a layout")?;
        let mut layout = Layout::default();
        self.skip_trivia();
        if matches!(self.peek(), Some(b'0'..=b'9')) {
            loop {
                let at = self.pos;
                let d = self.int("a dimension number")?;
                if d < 0 || d >= MAX_RANK as i64 {
                    return Err(
                        self.error_at(at, format!("minor_to_major entry {d} is out of range"))
                    );
                }
                layout.minor_to_major.push(d as usize);
                if !self.eat(b',') {
                    break;
                }
            }
        }
        if self.eat(b':') {
            self.properties(&mut layout)?;
            // `M(0)` and the like set a rare property to its default.
            layout.tidy();
        }
        self.expect(b'}', "expects layout to end with '}'")
            .map_err(|e| TextError { message: "expects layout to end with '}' (properties go in the order D T L # * E S SC P M)".into(), ..e })?;
        Ok(layout)
    }

    /// Parses the properties after `:` in XLA's fixed order; each is
    /// optional and appears at most once.
    fn properties(&mut self, layout: &mut Layout) -> Result<(), TextError> {
        self.skip_trivia();
        if self.at_word(b"D") {
            self.dim_levels(layout)?;
        }
        if self.at_word(b"T") {
            self.tiles(layout)?;
        }
        if self.at_word(b"L") {
            self.pos += 1;
            layout.tail_padding_alignment_in_elements = self.paren_int("L")?;
            self.skip_trivia();
        }
        if self.peek() == Some(b'#') {
            self.pos += 1;
            layout.rare_mut().index_primitive_type = Some(self.paren_uint_type("#")?);
            self.skip_trivia();
        }
        if self.peek() == Some(b'*') {
            self.pos += 1;
            layout.rare_mut().pointer_primitive_type = Some(self.paren_uint_type("*")?);
            self.skip_trivia();
        }
        if self.at_word(b"E") {
            self.pos += 1;
            layout.element_size_in_bits = self.paren_int("E")?;
            self.skip_trivia();
        }
        if self.at_word(b"S") {
            self.pos += 1;
            layout.memory_space = self.paren_int("S")?;
            self.skip_trivia();
        }
        if self.at_word(b"SC") {
            self.split_configs(layout)?;
        }
        if self.at_word(b"P") {
            self.pos += 1;
            self.expect(b'(', "'(' after P")?;
            let shape = self.shape()?;
            self.expect(b')', "')' to close P(...)")?;
            layout.rare_mut().physical_shape = Some(Box::new(shape));
            self.skip_trivia();
        }
        if self.at_word(b"M") {
            self.pos += 1;
            layout.rare_mut().dynamic_shape_metadata_prefix_bytes = self.paren_int("M")?;
            self.skip_trivia();
        }
        if self.at_word(b"PAD") {
            self.pos += 3;
            self.expect(b'(', "'(' after PAD")?;
            let mut padded: Vec<i64> = Vec::new();
            loop {
                padded.push(self.int("a padded dimension size")?);
                if self.eat(b')') {
                    break;
                }
                self.expect(b',', "',' or ')' in PAD(...)")?;
            }
            layout.padded_dimensions = Some(padded.into_boxed_slice());
        }
        Ok(())
    }

    /// `D(...)`: the dimension level types.
    fn dim_levels(&mut self, layout: &mut Layout) -> Result<(), TextError> {
        self.pos += 1;
        self.expect(b'(', "'(' after D")?;
        loop {
            self.skip_trivia();
            let kind = match self.peek() {
                Some(b'D') => DimLevelKind::Dense,
                Some(b'C') => DimLevelKind::Compressed,
                Some(b'S') => DimLevelKind::Singleton,
                Some(b'H') => DimLevelKind::LooseCompressed,
                _ => return Err(self.error("expected a dimension level type D, C, S or H")),
            };
            self.pos += 1;
            let mut level = DimLevel {
                kind,
                unique: true,
                ordered: true,
            };
            if self.peek() == Some(b'+') {
                self.pos += 1;
                level.unique = false;
            }
            if self.peek() == Some(b'~') {
                self.pos += 1;
                level.ordered = false;
            }
            layout.rare_mut().dim_levels.push(level);
            if self.eat(b')') {
                break;
            }
            self.expect(b',', "',' or ')' in D(...)")?;
        }
        self.skip_trivia();
        Ok(())
    }

    /// `T(...)(...)`: the tiles, one level after another.
    fn tiles(&mut self, layout: &mut Layout) -> Result<(), TextError> {
        self.pos += 1;
        self.skip_trivia();
        if self.peek() != Some(b'(') {
            return Err(self.error("expected '(' to start a tile after T"));
        }
        while self.peek() == Some(b'(') {
            let tile_start = self.pos;
            self.pos += 1;
            let mut tile = Tile::default();
            if !self.eat(b')') {
                loop {
                    self.skip_trivia();
                    if self.peek() == Some(b'*') {
                        self.pos += 1;
                        tile.dims.push(Tile::COMBINE);
                    } else {
                        // Refused here, not stored: -1 is also
                        // `Tile::COMBINE`, so a written -1 would
                        // silently turn into '*'.
                        let at = self.pos;
                        let size = self.int("a tile size or '*'")?;
                        if size <= 0 {
                            let (level, entry) = (layout.tiles.len(), tile.dims.len());
                            return Err(self.error_at(at, format!("tile {level} entry {entry} is {size}; tile sizes must be positive or '*'")));
                        }
                        tile.dims.push(size);
                    }
                    if tile.dims.len() > MAX_RANK {
                        return Err(self.error(format!("a tile with more than {MAX_RANK} entries")));
                    }
                    if self.eat(b')') {
                        break;
                    }
                    self.expect(b',', "',' or ')' in a tile")?;
                }
            }
            if layout.tiles.len() == MAX_TILE_LEVELS {
                return Err(self.error_at(tile_start, format!("more than {MAX_TILE_LEVELS} tiling levels; at most {MAX_TILE_LEVELS} are supported")));
            }
            layout.tiles.push(tile);
            self.skip_trivia();
        }
        Ok(())
    }

    /// `SC(d:i,...)...`: the split configs.
    fn split_configs(&mut self, layout: &mut Layout) -> Result<(), TextError> {
        self.pos += 2;
        self.skip_trivia();
        if self.peek() != Some(b'(') {
            return Err(self.error("expected '(' after SC"));
        }
        while self.peek() == Some(b'(') {
            self.pos += 1;
            let dimension = self.int("a split dimension")?;
            self.expect(b':', "':' after the split dimension")?;
            let mut split_indices = SmallVec::new();
            loop {
                split_indices.push(self.int("a split index")?);
                if self.eat(b')') {
                    break;
                }
                self.expect(b',', "',' or ')' in a split config")?;
            }
            layout.rare_mut().split_configs.push(SplitConfig {
                dimension,
                split_indices,
            });
            self.skip_trivia();
        }
        Ok(())
    }

    /// True when the identifier at the cursor is exactly `word`.
    fn at_word(&self, word: &[u8]) -> bool {
        self.text[self.pos..].starts_with(word)
            && !matches!(
                self.text.get(self.pos + word.len()),
                Some(b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_')
            )
    }

    fn paren_int(&mut self, letter: &str) -> Result<i64, TextError> {
        self.expect(b'(', format_args!("'(' after {letter}"))?;
        let v = self.int(format_args!("an integer in {letter}(...)"))?;
        self.expect(b')', format_args!("')' to close {letter}(...)"))?;
        Ok(v)
    }

    fn paren_uint_type(&mut self, letter: &str) -> Result<PrimitiveType, TextError> {
        self.expect(b'(', format_args!("'(' after {letter}"))?;
        self.skip_trivia();
        let at = self.pos;
        let name = std::str::from_utf8(self.ident()).unwrap_or("");
        let t = PrimitiveType::from_name(name)
            .filter(|t| t.is_unsigned_integer())
            .ok_or_else(|| {
                self.error_at(
                    at,
                    format!("expected an unsigned integer type in {letter}(...), found '{name}'"),
                )
            })?;
        self.expect(b')', format_args!("')' to close {letter}(...)"))?;
        Ok(t)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------
// Printing.

impl fmt::Display for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('(')?;
        for (i, &d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            if d == Tile::COMBINE {
                f.write_char('*')?;
            } else {
                write!(f, "{d}")?;
            }
        }
        f.write_char(')')
    }
}

impl fmt::Display for Layout {
    /// Prints `{m2m:props}` with every default property omitted, in XLA's
    /// fixed order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('{')?;
        for (i, d) in self.minor_to_major.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            write!(f, "{d}")?;
        }
        let mut colon = false;
        let mut prop = |f: &mut fmt::Formatter<'_>| -> fmt::Result {
            if !colon {
                colon = true;
                f.write_char(':')?;
            }
            Ok(())
        };
        if self.is_sparse() {
            prop(f)?;
            f.write_str("D(")?;
            for (i, level) in self.dim_levels().iter().enumerate() {
                if i > 0 {
                    f.write_char(',')?;
                }
                f.write_char(level.kind.letter())?;
                if !level.unique {
                    f.write_char('+')?;
                }
                if !level.ordered {
                    f.write_char('~')?;
                }
            }
            f.write_char(')')?;
        }
        if !self.tiles.is_empty() {
            prop(f)?;
            f.write_char('T')?;
            for t in &self.tiles {
                write!(f, "{t}")?;
            }
        }
        if self.tail_padding_alignment_in_elements != 1 {
            prop(f)?;
            write!(f, "L({})", self.tail_padding_alignment_in_elements)?;
        }
        if let Some(t) = self.rare().index_primitive_type {
            prop(f)?;
            write!(f, "#({t})")?;
        }
        if let Some(t) = self.rare().pointer_primitive_type {
            prop(f)?;
            write!(f, "*({t})")?;
        }
        if self.element_size_in_bits != 0 {
            prop(f)?;
            write!(f, "E({})", self.element_size_in_bits)?;
        }
        if self.memory_space != 0 {
            prop(f)?;
            write!(f, "S({})", self.memory_space)?;
        }
        if !self.rare().split_configs.is_empty() {
            prop(f)?;
            f.write_str("SC")?;
            for sc in &self.rare().split_configs {
                write!(f, "({}:", sc.dimension)?;
                write_list(f, &sc.split_indices)?;
                f.write_char(')')?;
            }
        }
        if let Some(p) = &self.rare().physical_shape {
            prop(f)?;
            write!(f, "P({p})")?;
        }
        if self.rare().dynamic_shape_metadata_prefix_bytes > 0 {
            prop(f)?;
            write!(f, "M({})", self.rare().dynamic_shape_metadata_prefix_bytes)?;
        }
        if let Some(padded) = &self.padded_dimensions {
            prop(f)?;
            f.write_str("PAD(")?;
            write_list(f, padded)?;
            f.write_char(')')?;
        }
        f.write_char('}')
    }
}

/// Writes `items` separated by commas, as HLO text lists numbers.
pub fn write_list(
    f: &mut impl fmt::Write,
    items: impl IntoIterator<Item = impl fmt::Display>,
) -> fmt::Result {
    write_separated(f, items, ",")
}

/// Writes `items` with `sep` between them.
pub fn write_separated(
    f: &mut impl fmt::Write,
    items: impl IntoIterator<Item = impl fmt::Display>,
    sep: &str,
) -> fmt::Result {
    for (i, v) in items.into_iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write!(f, "{v}")?;
    }
    Ok(())
}

impl ArrayShape {
    /// Writes `type[dims]` without the layout.
    fn write_dims(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.element_type.name())?;
        f.write_char('[')?;
        for (i, &d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            if self.is_unbounded_dim(i) {
                f.write_char('?')?;
            } else {
                if self.is_dynamic_dim(i) {
                    f.write_str("<=")?;
                }
                write!(f, "{d}")?;
            }
        }
        f.write_char(']')
    }
}

impl fmt::Display for ArrayShape {
    /// Prints XLA's form: a scalar's plain `{}` layout is left out, while a
    /// scalar layout with properties prints as `{:T(256)}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_dims(f)?;
        if let Some(layout) = &self.layout
            && (self.rank() > 0 || !layout.is_plain())
        {
            write!(f, "{layout}")?;
        }
        Ok(())
    }
}

/// Prints a shape with or without its layouts.
struct ShapeText<'a> {
    shape: &'a Shape,
    layouts: bool,
}

impl fmt::Display for ShapeText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shape {
            Shape::Array(a) if self.layouts => write!(f, "{a}"),
            Shape::Array(a) => a.write_dims(f),
            Shape::Tuple(elements) => {
                f.write_char('(')?;
                for (i, e) in elements.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                        // XLA annotates every fifth element of a tuple.
                        if i % 5 == 0 {
                            write!(f, "/*index={i}*/")?;
                        }
                    }
                    write!(
                        f,
                        "{}",
                        ShapeText {
                            shape: e,
                            layouts: self.layouts
                        }
                    )?;
                }
                f.write_char(')')
            }
            Shape::Token => f.write_str("token[]"),
            Shape::Opaque => f.write_str("opaque[]"),
            Shape::Buffer(inner) => {
                write!(
                    f,
                    "b({})",
                    ShapeText {
                        shape: inner,
                        layouts: self.layouts
                    }
                )
            }
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        ShapeText {
            shape: self,
            layouts: true,
        }
        .fmt(f)
    }
}

impl Shape {
    /// The shape printed without layouts, as XLA prints computation
    /// signatures: `(f32[2,3], s32[])`.
    pub fn display_without_layout(&self) -> impl fmt::Display + '_ {
        ShapeText {
            shape: self,
            layouts: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `input`, prints it, and compares with `expected` (or with the
    /// input itself when `expected` is empty).
    fn check(input: &str, expected: &str) {
        let shape = parse_shape(input).unwrap_or_else(|e| panic!("{input}: {e} at {}", e.offset));
        let printed = shape.to_string();
        let expected = if expected.is_empty() { input } else { expected };
        assert_eq!(printed, expected);
        assert_eq!(
            parse_shape(&printed).unwrap(),
            shape,
            "reparse of {printed}"
        );
    }

    #[test]
    fn rare_properties_at_their_defaults_equal_none() {
        // `M(0)` parses to the default, so the layout equals the plain one
        // and prints like it (the rare properties' box is dropped).
        let a = parse_layout("{1,0:M(0)}").unwrap();
        assert_eq!(a, Layout::new(&[1, 0]));
        assert!(!a.has_rare_properties());
        assert_eq!(a.to_string(), "{1,0}");
        let b = parse_layout("{1,0:M(8)}").unwrap();
        assert_ne!(b, Layout::new(&[1, 0]));
        assert_eq!(b.rare().dynamic_shape_metadata_prefix_bytes, 8);
        assert_eq!(b.clone(), b);
    }

    fn check_error(input: &str, offset: usize, message: &str) {
        let e = parse_shape(input).expect_err(input);
        assert!(e.message.contains(message), "{input}: got '{}'", e.message);
        assert_eq!(e.offset, offset, "{input}: {}", e.message);
    }

    #[test]
    fn round_trips() {
        check("f32[3,5]{1,0:T(2,2)}", "");
        check("bf16[8,256]{1,0:T(8,128)(2,1)}", "");
        check(
            "f32[123,456,789]{0,1,2:T(2, * , 128)}",
            "f32[123,456,789]{0,1,2:T(2,*,128)}",
        );
        check("bf16[2,3,1004]{2,1,0:T(2,*,*,128)}", "");
        check("f32[]", "");
        check("u32[]{:T(128)}", "");
        check("f32[123,<=456]", "");
        check("f32[?,3]{1,0}", "");
        check("(f32[42], u32[<=123,<=456])", "");
        check(
            "(f32[1], f32[2], f32[3], f32[4], f32[5], f32[6])",
            "(f32[1], f32[2], f32[3], f32[4], f32[5], /*index=5*/f32[6])",
        );
        check("()", "");
        check("token[]", "");
        check("opaque[]", "");
        check("b(f32[4]{0})", "");
        check("s4[123,456]{1,0:T(2,128)E(4)}", "");
        check("pred[123,456]{1,0:T(2,128)S(3)}", "");
        check("f32[123,456]{1,0:T(16,128)M(1024)}", "");
        check("pred[123,456]{1,0:S(3)SC(0:10)(1:4,5)}", "");
        check("f32[4,4]{1,0:D(D,C+~)#(u16)*(u32)}", "");
        check("f32[2,3]{0,1:PAD(3,5)}", "");
        check("f32[2,3]{1,0:L(4)}", "");
        check("f32[2,3]{1,0:L(1)E(0)S(0)}", "f32[2,3]{1,0}");
    }

    #[test]
    fn errors() {
        check_error(
            "f32[123,456,789]{1:T(2, * , 128)}",
            16,
            "Dimensions size is 3, but minor to major size is 1.",
        );
        check_error("f32[123,456]foobar{0,1}", 12, "end of the shape");
        check_error("f32[123,456]{foo}", 12, "end of the shape");
        check_error("f33[1]", 0, "expected an element type");
        check_error("f32[1,", 6, "expected a dimension size");
        check_error("f32[1}", 5, "',' or ']'");
        check_error("f32[99999999999999999999]", 4, "too large");
        check_error("f32[2]{0:E(4)T(2)}", 13, "expects layout to end with '}'");
        check_error("f32[2]{0:#(s32)}", 11, "unsigned integer type");
        check_error("token[2]", 0, "takes no dimensions");
        check_error("(f32[1] f32[2])", 8, "',' or ')'");
        check_error(
            "f32[2]{0:T(1)(1)(1)(1)(1)(1)(1)(1)(1)}",
            34,
            "more than 8 tiling levels",
        );
        check("f32[2]{0:T(1)(1)(1)(1)(1)(1)(1)(1)}", "");
    }

    #[test]
    fn brace_after_shape_needs_int_or_colon() {
        let (shape, end) = parse_shape_at(b"f32[2] {\n  ROOT", 0).unwrap();
        assert_eq!(shape.to_string(), "f32[2]");
        assert_eq!(end, 6);
    }

    #[test]
    fn signature_form_drops_layouts() {
        let s = parse_shape("(f32[2,3]{0,1}, s32[])").unwrap();
        assert_eq!(s.display_without_layout().to_string(), "(f32[2,3], s32[])");
    }
}
