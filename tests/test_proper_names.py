"""Names as a question writes them (brain_sql/proper_names.py), which quality's
`stranger` reads: whom a question is about, and whether an answer knows them."""

import pytest

from brain_sql.proper_names import knows, names_in


@pytest.mark.parametrize(
    "text, names",
    [
        ("What did Anna research?", ["Anna"]),
        ("What is Anna's identity?", ["Anna"]),
        ("Anna went home.", []),  # a capitalised word opening a sentence names no one by itself
        ("Which region is Corey Taylor's city of birth located?", ["Corey Taylor"]),
        ("Where did Tom go in May, on a Monday, or in Sept?", ["Tom"]),  # months and days name no one
        ('Does Tom like "The Four Seasons" by Vivaldi?', ["Tom", "Four Seasons", "Vivaldi"]),
        ("Localization of Rad51 and N-cadherin in Aire-expressing cells", []),
        ("Deltex interacts with eIF3. There is no known interaction between Deltex and elF3", ["Deltex"]),
        ("What did Dr. Smith prescribe?", ["Smith"]),  # no sentence ends at "Dr."
        ("What did Alice  Chen say?", ["Alice Chen"]),
        ("- What did Dana say about SSO?", ["Dana"]),  # a list's item opens like a sentence
        ("Did Harry Potter And The Chamber Of Secrets sell?", []),  # a title, no one's name
        ("Plans for Christmas or Weds?", []),
        ("Did Tom go out on St. Patrick's Day, Memorial Day or New Year’s Eve?", ["Tom"]),  # holidays
        ("What did Eve, Doris Day and Tom Day say on Christmas Eve?", ["Eve", "Doris Day", "Tom Day"]),
        ("Was it Anna's Day off, or Father's Day, or All Saints' Day?", ["Anna", "Day"]),  # Anna's is no holiday
        ("What happened on Day 3, before Apollo 11 flew?", []),  # numbered parts, no one's names
        ("What did Tom say on Launch Day?", ["Tom", "Launch Day"]),
        ("Did Łukasz meet Ömer and Zoë in Київ?", ["Łukasz", "Ömer", "Zoë", "Київ"]),  # Latin and Cyrillic
        ("Does AlphaBeta raise the Aβ level?", []),  # capitals within a word, Greek: no names
        ("Did Mary-Jane call Kathi-Anne O'Brien?", ["Mary-Jane", "Kathi-Anne O'Brien"]),  # hyphens, apostrophes
        ("What did McDonald, LaToya and D’Angelo say?", ["McDonald", "LaToya", "D’Angelo"]),  # surnames' prefixes
        ("Is Hutchinson–Gilford progeria rare?", ["Hutchinson–Gilford"]),  # a typeset hyphen
        ("Did O‘Brien call Tom on Monday-Friday or Mon-Fri?", ["O‘Brien", "Tom"]),  # a calendar's range: no one
        ("no names here, and I said so", []),
    ],
)
def test_the_names_a_question_writes(text, names):
    assert names_in(text) == names


@pytest.mark.parametrize(
    "text, name, known",
    [
        ("She met Anna. Then they left.", "Anna", True),
        ("Anna went home.", "Anna", True),
        ("Dancers such as Anna Pavlova toured.", "Anna", True),  # one Anna, known by a longer name
        ("Per Dana Whitfield, SSO is live. Dana Whitfield said so.", "Dana", True),  # "Per" opens the sentence
        ("Club\nPer Dana Whitfield, the club meets. Dana Whitfield chairs it.", "Dana", True),  # and a line
        ("Anna Pavlova and Anna Karenina were both Russian.", "Anna", False),  # which Anna?
        ("Songs by Elton John and John Lennon.", "John", False),
        ("In San Francisco the study ran.", "San Francisco", True),
        ("Priya said the budget is fine.", "Priya Patel", True),  # a name of several words, by one of them
        ("Priya Shah said the budget is fine.", "Priya Patel", False),  # ... written on its own
        ("Call With Dana Whitfield\nDana Whitfield said SSO goes live.", "Dana", True),  # one person
        ("Notes\n- Per Dana Whitfield, SSO goes live.\n- Dana Whitfield chairs it.", "Dana", True),
        ("the putative E3 ubiquitin ligase Deltex1 binds", "Deltex", True),  # a number may follow it
        ("Ask ANNA.", "Anna", False),  # in capitals in a sentence: another word
        ("Set up nginx with TLS.", "Nginx", True),  # in lower case, as notes write a tool
        ("I will sign it.", "Will", False),  # ... but not a stop word
        ("Akinoshū Kenji was born in Hiroshima.", "Akinoshu Kenji", True),  # a full name, without its accents
        ("Zoë painted a sunrise.", "Zoe", False),  # one word only as written
        ("Renée painted a sunrise.", "Renée", True),
        ("Aligned with SAM and read by SAMtools.", "Sam", False),  # an acronym
        ("Will you mark the page?", "Mark", False),  # a given name that is an everyday word
        ("Sunny days in summer.", "Summer", False),
        ("TOM: I will ship it.\nANNA: Good.", "Tom", True),  # a speaker's label
        ("- **TOM:** I will ship it.", "Tom", True),
        ("SAM synthesis in liver\nSAM levels rose.", "Sam", False),  # capitals opening a line
        ("MARK YOUR CALENDARS", "Mark", False),  # a heading
        ("We planned launch day with care.", "Launch Day", True),  # a thing's name, in lower case
        ("We planned the day with care.", "Launch Day", False),
        ("Annabel planted tomatoes.", "Anna", False),
        ("Dr. O’Brien signed it.", "O'Brien", True),  # either apostrophe
        ("Brien signed it.", "O'Brien", False),
        ("Hutchinson–Gilford progeria is rare.", "Hutchinson-Gilford", True),  # either hyphen
        ("Mary came.", "Mary-Jane", False),
        ("Captain Jean Luc Picard prefers tea.", "Captain Jean-Luc Picard", True),  # a hyphen as a space
        ("Most non-Hodgkin lymphomas respond.", "Non-Hodgkin", True),  # in any case
        ("The office wi\u2011fi reaches the garden.", "Wi-Fi", True),
        ("Roll back with the deploy runbook.", "Deploy-Runbook", True),
        ("Mary met Jane.", "Mary-Jane", False),  # not by its parts apart
        ("Mary Jane Watson and Mary Jane Girls.", "Mary-Jane", False),  # which Mary Jane?
        ("the o\u2019brien file", "O'Brien", True),  # in lower case, with either apostrophe
        ("Donald came.", "McDonald", False),
        ("nobody at all", "Anna", False),
    ],
)
def test_whether_a_text_knows_someone_by_a_name(text, name, known):
    assert knows(text, name) is known
