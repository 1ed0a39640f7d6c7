"""A tuning set for bench/eval_validate.py (``--cases tune36``): turns drawn at random (seed 3637) from the dev data
(LoCoMo and the persona chats, /work/shared/data/dev) by stop 36 after bench/validate_blind4.py was frozen, none of
them in blind4, with facts written the same way as blind4's. Unlike blind4 it was written to be tuned on: the
validator changes of stop 36 that follow it were found on its failures, so its numbers are not held out.
"""

from __future__ import annotations

Case = tuple[str, list[tuple[str, str]], list[tuple[str, str]]]

TUNE36: list[Case] = [
    ("It really is, I'm not sure I'll ever understand why watching my turtles slowly walk around makes me so happy. "
     "But I'm very glad it does.",
     [("User has turtles", "identity"), ("Watching their turtles makes User happy", "preference"),
      ("User enjoys watching their turtles", "preference")],
     [("User has a tortoise farm", "identity"), ("User's turtles make them anxious", "other")]),
    ("Thanks Maria! I may have found a job at a tech company I like that needs my mechanical skills for their "
     "hardware team. It feels different, but I think it's a great opportunity to learn and contribute.",
     [("User may have found a job at a tech company", "other"), ("User has mechanical skills", "identity"),
      ("User sees the job as a great opportunity", "other")],
     [("User was hired by a bank", "other"), ("User has software skills", "identity")]),
    ("Finding my Zen is a mix of things - a moment to myself plus favorite tunes is usually enough. I also enjoy "
     "aerial yoga, it's a great way to switch off and focus on my body.",
     [("User enjoys aerial yoga", "preference"), ("User does aerial yoga", "identity"),
      ("User relaxes with music", "other")],
     [("User teaches aerial yoga", "identity"), ("User enjoys hot yoga", "preference")]),
    ("It was super awesome! So much adrenaline went into that last match, and the other finalist even shook my "
     "hand! Enough about me though, how about you? What have you been up to?",
     [("User played in a final", "other"), ("The other finalist shook User's hand", "other")],
     [("User lost the final", "other"), ("User shook hands with the referee", "other")]),
    ("Thanks, Mel! I made this stained glass window to remind myself and others that within us all is the key to "
     "discovering our true potential and living our best life.",
     [("User made a stained glass window", "other"), ("User makes stained glass", "identity")],
     [("User bought a stained glass window", "other"), ("User made a mosaic", "other")]),
    ("It was great! Playing games is my escape from life struggles, so I generally don't get crazy competitive over "
     "them. The people at the convention were the same way!",
     [("User plays games", "identity"), ("Gaming is User's escape", "other"), ("User went to a convention", "other"),
      ("User is not very competitive about games", "identity")],
     [("User is very competitive about games", "identity"), ("User organized the convention", "other")]),
    ("Hey Tim! Great to hear from you. My week's been busy - I started doing seminars, helping people with their "
     "sports and marketing. It's been awesome!",
     [("User started doing seminars", "other"), ("User helps people with sports and marketing", "other"),
      ("User had a busy week", "other"), ("User enjoys giving seminars", "preference")],
     [("User started attending seminars", "other"), ("User stopped doing seminars", "other")]),
    ("Hey Caroline, hope all's good! I had a quiet weekend after we went camping with my fam two weekends ago. It was "
     "great to unplug and hang with the kids. What've you been up to? Anything fun over the weekend?",
     [("User went camping with their family", "other"), ("User has kids", "identity"),
      ("User had a quiet weekend", "other"), ("User enjoyed camping with their kids", "preference")],
     [("User went camping alone", "other"), ("User went camping last weekend", "temporal")]),
    ("Way to go, Jon! Don't quit, remember, failures lead you closer to success. Here's a pic from when I was "
     "dancing - it was a tough road, but it was worth it!",
     [("User used to dance", "identity"), ("User danced", "other")],
     [("User is a dance teacher", "identity"), ("User quit their job", "other")]),
    ("I love coconut milk, but I also enjoy chocolate and mixed berry flavors.",
     [("User loves coconut milk", "preference"), ("User enjoys chocolate", "preference"),
      ("User likes mixed berry flavors", "preference")],
     [("User dislikes chocolate", "preference"), ("User loves vanilla", "preference")]),
    ("I love the energy, diversity, and awesome food of this city. Trying local seafood is a must! Plus, the support "
     "from the fans at games is incredible.",
     [("User loves the city's food", "preference"), ("User likes the city's energy", "preference"),
      ("User enjoys local seafood", "preference")],
     [("User dislikes seafood", "preference"), ("User hates the city", "preference")]),
    ("Hey Maria, last week was really eye-opening. I visited a veteran's hospital and met some amazing people. It "
     "made me appreciate what we have and the need to give back.",
     [("User visited a veterans hospital", "other"), ("User met amazing people at a hospital", "other"),
      ("User wants to give back", "preference")],
     [("User works at a veterans hospital", "identity"), ("User is a veteran", "identity")]),
    ("Hey Maria! Guess what? I'm now part of the fire-fighting brigade. I'm super excited to be involved and help out "
     "my community!",
     [("User joined the fire-fighting brigade", "other"), ("User is a firefighter", "identity"),
      ("User is excited to help their community", "preference")],
     [("User left the fire-fighting brigade", "other"), ("User is a police officer", "identity")]),
    ("I reccomend finding a fantasy book series to read through. Most fiction series are great reads when your "
     "trying to relax.",
     [("User recommends fantasy book series", "preference"), ("User thinks fiction series are great reads", "other")],
     [("User recommends science fiction movies", "preference"), ("User writes fantasy books", "identity")]),
    ("My favorite book is The Great Gatsby. I love the characters and the story.",
     [("User's favorite book is The Great Gatsby", "preference"), ("User loves The Great Gatsby", "preference")],
     [("User's favorite book is Moby Dick", "preference"), ("User's favorite movie is The Great Gatsby", "preference")]),
    ("I like to play Super Smash Bros. and Pokemon.",
     [("User likes playing Pokemon", "preference"), ("User plays Super Smash Bros", "identity"),
      ("User plays video games", "identity")],
     [("User plays Mario Kart", "identity"), ("User collects Pokemon cards", "identity")]),
    ("I like to do a lot of different things, but my favorite is probably running.",
     [("User's favorite activity is running", "preference"), ("User likes running", "preference")],
     [("User's favorite activity is swimming", "preference"), ("User runs marathons", "identity")]),
    ("My least favorite part is when I have to work late.",
     [("User dislikes working late", "preference"), ("User sometimes works late", "other")],
     [("User loves working late", "preference"), ("User works night shifts", "identity")]),
    ("Oh, that's cool. I like to play basketball too.",
     [("User likes to play basketball", "preference"), ("User plays basketball", "identity")],
     [("User plays basketball professionally", "identity"), ("User likes to play football", "preference")]),
    ("I'm not sure yet. I'm just going to keep working on my music and see where it takes me.",
     [("User works on music", "other"), ("User makes music", "identity"), ("User will keep working on their music", "decision")],
     [("User gave up music", "other"), ("User signed a record deal", "other")]),
    ("That's great! I have a daughter who's a child prodigy. She's only 10 years old and she's already in high school.",
     [("User has a daughter", "identity"), ("User's daughter is a child prodigy", "relationship"),
      ("User's daughter is 10 years old", "relationship"), ("User's daughter is in high school", "relationship")],
     [("User is in high school", "identity"), ("User's son is a prodigy", "relationship"),
      ("User's daughter is 12", "relationship")]),
    ("I love pasta too! I'm not very good at making chicken parmesan, but I love eating it.",
     [("User loves pasta", "preference"), ("User loves eating chicken parmesan", "preference"),
      ("User is not good at cooking chicken parmesan", "identity")],
     [("User is great at making chicken parmesan", "identity"), ("User hates pasta", "preference")]),
    ("That's a great job. I'm retired, but I used to be a carpenter.",
     [("User is retired", "identity"), ("User used to be a carpenter", "identity"),
      ("User was a carpenter", "identity"), ("User is a former carpenter", "identity")],
     [("User is a carpenter", "identity"), ("User used to be a plumber", "identity")]),
    ("I love spending time with my wife and kids. We love to go to the park, play games, and read books together.",
     [("User is married", "relationship"), ("User has kids", "identity"), ("User has a wife", "relationship"),
      ("User loves spending time with their family", "preference"), ("User reads books with their kids", "other")],
     [("User has a husband", "relationship"), ("User goes to the beach with their family", "other")]),
    ("I like helping people and making a difference in their lives.",
     [("User likes helping people", "preference"), ("User enjoys making a difference", "preference")],
     [("User is a nurse", "identity"), ("User dislikes helping people", "preference")]),
    ("Oh, that's cool. I have a rival school too. We always play them at the end of the season.",
     [("User's school has a rival school", "other"), ("User plays their rival school at the end of the season", "other")],
     [("User's school never plays its rival", "other"), ("User is a coach", "identity")]),
]
