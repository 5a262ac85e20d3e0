"""Write `examples/leave.parquet`: ten employee leave requests, written by hand in different
voices (emails, terse notes, forms of `key: value` lines, non-native English). Their true
answers are in `check_leave.py`.

    python examples/make_leave.py
    decide run examples/leave.parquet --spec examples/leave.yaml -o out/leave
    python examples/check_leave.py out/leave
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

HERE = Path(__file__).parent

REQUESTS = {
    "LV-01": """Subject: Annual leave request

Hi Priya,

I'd like to book 5 days of annual leave starting Monday, June 9, 2025. I currently have 18 days
left in my balance. Tom Becker has agreed to cover my clients while I'm away.

Thanks,
Marcus Lindqvist""",
    "LV-02": "sick leave - 3 days from 14 July 2025. balance 2 days. no cover yet. "
    "- Dana Whitfield",
    "LV-03": """Leave request form
Employee: Akira Tanaka
Leave type: Parental
Start date: 2025-09-01
Days requested: 40
Remaining balance: 40
Cover arranged: yes (Lena Fischer)""",
    "LV-04": """Dear manager, I am writing for ask the unpaid leave of 10 days, begin from 3rd of
November 2025, because my mother is ill in my country. I have not more annual days, my balance
is 0 days. My colleague Sergio will do my work, he already say yes.
Best regards, Oksana Kovalenko""",
    "LV-05": """hey! can I take friday 22 aug 2025 off? just 1 day, annual leave. I've got 7
days left. nobody covering but it's a quiet day - Jamie Ortiz""",
    "LV-06": """Hello HR,

My grandfather passed away last weekend and I need bereavement leave for 4 days beginning
16/06/2025. My remaining leave balance is 12 days. Anna Kowalski from accounts will cover my
invoices.

Regards,
Ravi Menon""",
    "LV-07": """NAME: Grace O'Connor
TYPE OF LEAVE: sick
FIRST DAY OFF: 02/10/2025
NUMBER OF DAYS: 2
DAYS REMAINING: 9
COVER: none arranged""",
    "LV-08": """Hi team, forwarding on behalf of Liam Novak: he is requesting 15 days of annual
leave starting 1 December 2025 for his wedding trip. HR confirms his balance stands at 11 days,
so this exceeds what he has. Cover: Sofia Marin will handle his on-call shifts.""",
    "LV-09": """Request: parental leave. Me, Chen Wei. Start 2025-10-20, 20 days. Balance left 25
day. Cover is arrange with my team lead.""",
    "LV-10": """To whom it may concern,

Please accept this request for 8 days of unpaid leave commencing Tuesday, January 13, 2026. I
understand my paid leave balance is 3 days. I have not yet found anyone to cover my duties.

Sincerely,
Eleanor Voss""",
}


def main() -> None:
    frame = pl.DataFrame({"doc_id": list(REQUESTS), "document": list(REQUESTS.values())})
    frame.write_parquet(HERE / "leave.parquet")
    print(f"wrote {frame.height} leave requests to {HERE / 'leave.parquet'}")


if __name__ == "__main__":
    main()
