"""Small documents the tests build themselves: a PDF with a text layer, a
DOCX, an XLSX, a CSV, and broken ones (cut short, encrypted, a zip bomb),
and the file parts that carry them."""

from __future__ import annotations

import base64
import io
import zipfile
import zlib
from typing import Any
from xml.sax.saxutils import escape

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def file_part(name: str, kind: str, data: bytes) -> dict[str, Any]:
    url = f"data:{kind};base64,{base64.b64encode(data).decode()}"
    return {"type": "file", "file": {"filename": name, "file_data": url}}


def _pdf_text(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf(*pages: list[str], compress: bool = True, encrypt: bool = False) -> bytes:
    """A PDF whose pages show these lines (Helvetica, one Tj per line)."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, lines in enumerate(pages):
        shown = " T* ".join(f"({_pdf_text(line)}) Tj" for line in lines)
        content = f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET".encode("latin-1")
        stream, extra = (
            (zlib.compress(content), " /Filter /FlateDecode") if compress else (content, "")
        )
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(
            f"<< /Length {len(stream)}{extra} >>\nstream\n".encode() + stream + b"\nendstream"
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    encrypted = " /Encrypt << /Filter /Standard /V 1 /R 2 >>" if encrypt else ""
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{encrypted} >>\n"
        f"startxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def _zip(files: dict[str, str | bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'
)
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


def docx(*paragraphs: str, extra: dict[str, str | bytes] | None = None) -> bytes:
    body = "".join(f"<w:p><w:r><w:t>{escape(p)}</w:t></w:r></w:p>" for p in paragraphs)
    document = (
        f'<?xml version="1.0"?><w:document xmlns:w="{_W}"><w:body>{body}</w:body></w:document>'
    )
    return _zip({"[Content_Types].xml": _TYPES, "word/document.xml": document, **(extra or {})})


def xlsx(rows: list[list[str]], sheet: str = "Sheet1") -> bytes:
    strings = sorted({cell for row in rows for cell in row})
    index = {text: i for i, text in enumerate(strings)}
    cells = "".join(
        f'<row r="{r + 1}">'
        + "".join(
            f'<c r="{chr(65 + c)}{r + 1}" t="s"><v>{index[text]}</v></c>'
            for c, text in enumerate(row)
        )
        + "</row>"
        for r, row in enumerate(rows)
    )
    shared = "".join(f"<si><t>{escape(text)}</t></si>" for text in strings)
    return _zip(
        {
            "[Content_Types].xml": _TYPES,
            "xl/workbook.xml": f'<workbook xmlns="{_S}"><sheets>'
            f'<sheet name="{escape(sheet)}" sheetId="1"/></sheets></workbook>',
            "xl/sharedStrings.xml": f'<sst xmlns="{_S}">{shared}</sst>',
            "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{_S}"><sheetData>{cells}'
            "</sheetData></worksheet>",
        }
    )


def zip_bomb_docx() -> bytes:
    """A DOCX with a part that unpacks to 1,000 times its size (20 MB of zeros)."""
    return docx("Looks harmless.", extra={"word/media/padding.bin": bytes(20 << 20)})
